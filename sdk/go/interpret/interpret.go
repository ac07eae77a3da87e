// Package interpret adds the resource-interpreter export (flotilla_interpret_v1, sdk/ABI.md §10)
// to a plugin: a ResourceInterpreterCustomization rule names the plugin with `wasm: {plugin: NAME}`
// and the host calls it for that rule's operation.
package interpret

import (
	"encoding/json"
	"fmt"

	flotilla "flotilla.dev/sdk/go"
)

// Request is one operation and its inputs (only the operation's members are set).
type Request struct {
	// Operation is Karmada's name: InterpretReplica, InterpretComponent, ReviseReplica, Retain,
	// AggregateStatus, InterpretStatus, InterpretHealth, InterpretDependency.
	Operation       string            `json:"operation"`
	Object          json.RawMessage   `json:"object,omitempty"`
	ObservedObject  json.RawMessage   `json:"observedObject,omitempty"`
	DesiredReplicas *int64            `json:"desiredReplicas,omitempty"`
	StatusItems     []json.RawMessage `json:"statusItems,omitempty"`
}

// Reply carries the member of the request's operation, and no other (the host checks):
// Replicas (+ ReplicaRequirements) for InterpretReplica, Components, Patch (a JSON merge patch)
// for ReviseReplica and Retain, Status for AggregateStatus and InterpretStatus, Healthy for
// InterpretHealth, Dependencies for InterpretDependency.
type Reply struct {
	Replicas            *int64 `json:"replicas,omitempty"`
	ReplicaRequirements any    `json:"replicaRequirements,omitempty"`
	Components          []any  `json:"components,omitempty"`
	Patch               any    `json:"patch,omitempty"`
	Status              any    `json:"status,omitempty"`
	Healthy             *bool  `json:"healthy,omitempty"`
	Dependencies        []any  `json:"dependencies,omitempty"`
}

// Func answers one request.
type Func func(req *Request) (*Reply, error)

var handler Func

// Handle registers the interpreter.
func Handle(fn Func) { handler = fn }

// Int64 is a helper for Reply.Replicas.
func Int64(v int64) *int64 { return &v }

// Bool is a helper for Reply.Healthy.
func Bool(v bool) *bool { return &v }

// call is the export's body: request JSON in, status out (native tests call it too).
func call(request []byte) int32 {
	return flotilla.Run(func() error {
		if handler == nil {
			return flotilla.ErrNoHandler
		}
		var req Request
		if err := json.Unmarshal(request, &req); err != nil {
			return fmt.Errorf("interpret request: %w", err)
		}
		reply, err := handler(&req)
		if err != nil {
			return err
		}
		if reply == nil {
			reply = &Reply{}
		}
		return flotilla.SetJSON(reply)
	})
}
