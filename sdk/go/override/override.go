// Package override adds the override extension point (flotilla_override_v1) to a plugin.
package override

import (
	"encoding/json"
	"fmt"

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

// call is the export's body: request JSON in, status out (native tests call it too).
func call(request []byte) int32 {
	return flotilla.Run(func() error {
		if handler == nil {
			return flotilla.ErrNoHandler
		}
		var req Request
		if err := json.Unmarshal(request, &req); err != nil {
			return fmt.Errorf("override request: %w", err)
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
