// Package override adds the override extension point (flotilla_override_v1) to a plugin.
package override

import (
	"encoding/json"

	flotilla "flotilla.dev/sdk/go"
)

// Request is an override call: the manifest destined for one cluster (after earlier overriders)
// and that cluster.
type Request struct {
	Object  json.RawMessage `json:"object"`
	Cluster json.RawMessage `json:"cluster"`
}

// Op is one RFC 6902 JSON Patch operation.
type Op struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
	From  string `json:"from,omitempty"`
}

// Func returns the patch to apply to req.Object for req.Cluster (nil: leave it unchanged).
type Func func(req *Request) ([]Op, error)

var handler Func

// Handle registers the overrider.
func Handle(fn Func) { handler = fn }

//go:wasmexport flotilla_override_v1
func overrideV1(jp, jn, rp, rn uint32) int32 {
	return flotilla.Run(func() error {
		if handler == nil {
			return flotilla.ErrNoHandler
		}
		var req Request
		if err := json.Unmarshal(flotilla.Bytes(jp, jn), &req); err != nil {
			return err
		}
		ops, err := handler(&req)
		if err != nil {
			return err
		}
		if ops == nil {
			ops = []Op{}
		}
		return flotilla.SetJSON(map[string][]Op{"patch": ops})
	})
}
