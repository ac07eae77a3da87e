// go-shard-interpreter: a Flotilla resource interpreter in Go for a `Shard` CRD (example.com/v1),
// served by flotilla_interpret_v1 (sdk/ABI.md §10).
//
//	InterpretReplica: spec.replicas (1 when unset);
//	InterpretHealth:  healthy when status.observedGeneration >= metadata.generation and
//	                  status.readyReplicas >= spec.replicas.
//
// Other operations return an error (the customization does not route them here).
package main

import (
	"encoding/json"
	"fmt"

	"flotilla.dev/sdk/go/interpret"
)

type shard struct {
	Metadata struct {
		Generation int64 `json:"generation"`
	} `json:"metadata"`
	Spec struct {
		Replicas *int64 `json:"replicas"`
	} `json:"spec"`
	Status struct {
		ObservedGeneration int64 `json:"observedGeneration"`
		ReadyReplicas      int64 `json:"readyReplicas"`
	} `json:"status"`
}

func (s *shard) replicas() int64 {
	if s.Spec.Replicas == nil {
		return 1
	}
	return *s.Spec.Replicas
}

func init() {
	interpret.Handle(func(req *interpret.Request) (*interpret.Reply, error) {
		var s shard
		switch req.Operation {
		case "InterpretReplica":
			if err := json.Unmarshal(req.Object, &s); err != nil {
				return nil, fmt.Errorf("object: %w", err)
			}
			return &interpret.Reply{Replicas: interpret.Int64(s.replicas())}, nil
		case "InterpretHealth":
			if err := json.Unmarshal(req.ObservedObject, &s); err != nil {
				return nil, fmt.Errorf("observedObject: %w", err)
			}
			healthy := s.Status.ObservedGeneration >= s.Metadata.Generation && s.Status.ReadyReplicas >= s.replicas()
			return &interpret.Reply{Healthy: interpret.Bool(healthy)}, nil
		}
		return nil, fmt.Errorf("%s is not implemented by go-shard-interpreter", req.Operation)
	})
}

func main() {}
