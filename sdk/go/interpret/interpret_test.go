package interpret

import (
	"errors"
	"strings"
	"testing"

	flotilla "flotilla.dev/sdk/go"
)

func TestReplyHasOnlyTheOperationsMember(t *testing.T) {
	Handle(func(req *Request) (*Reply, error) {
		switch req.Operation {
		case "InterpretReplica":
			if !strings.Contains(string(req.Object), `"replicas":4`) {
				return nil, errors.New("object not decoded")
			}
			return &Reply{Replicas: Int64(4)}, nil
		case "ReviseReplica":
			return &Reply{Patch: map[string]any{"spec": map[string]any{"replicas": *req.DesiredReplicas}}}, nil
		case "InterpretHealth":
			return &Reply{Healthy: Bool(false)}, nil
		}
		return nil, errors.New(req.Operation + " is not implemented")
	})
	for _, c := range []struct{ request, want string }{
		{`{"operation":"InterpretReplica","object":{"spec":{"replicas":4}}}`, `{"replicas":4}`},
		{`{"operation":"ReviseReplica","object":{},"desiredReplicas":2}`, `{"patch":{"spec":{"replicas":2}}}`},
		{`{"operation":"InterpretHealth","observedObject":{}}`, `{"healthy":false}`},
	} {
		flotilla.Reset()
		if s := call([]byte(c.request)); s != flotilla.StatusOK {
			r, _, _ := flotilla.Recorded()
			t.Fatalf("%s: status %d: %s", c.request, s, r)
		}
		if result, _, _ := flotilla.Recorded(); string(result) != c.want {
			t.Fatalf("%s: result %s", c.request, result)
		}
	}
	flotilla.Reset()
	if s := call([]byte(`{"operation":"Retain"}`)); s != flotilla.StatusError {
		t.Fatalf("status %d", s)
	}
	if result, _, _ := flotilla.Recorded(); string(result) != "Retain is not implemented" {
		t.Fatalf("result %s", result)
	}
	if s := call([]byte(`[`)); s != flotilla.StatusError {
		t.Fatalf("malformed request: status %d", s)
	}
	if result, _, _ := flotilla.Recorded(); !strings.HasPrefix(string(result), "interpret request:") {
		t.Fatalf("result %s", result)
	}
}
