package override

import (
	"errors"
	"strings"
	"testing"

	flotilla "flotilla.dev/sdk/go"
)

func TestPatchReply(t *testing.T) {
	Handle(func(req *Request) ([]Op, error) {
		if !strings.Contains(string(req.Object), "nginx") || !strings.Contains(string(req.Cluster), "member1") {
			return nil, errors.New("request not decoded")
		}
		return []Op{{Op: "replace", Path: "/spec/replicas", Value: 2}, {Op: "remove", Path: "/metadata/labels/x"}}, nil
	})
	flotilla.Reset()
	if s := call([]byte(`{"object": {"image": "nginx"}, "cluster": {"metadata": {"name": "member1"}}}`)); s != flotilla.StatusOK {
		r, _, _ := flotilla.Recorded()
		t.Fatalf("status %d: %s", s, r)
	}
	want := `{"patch":[{"op":"replace","path":"/spec/replicas","value":2},{"op":"remove","path":"/metadata/labels/x"}]}`
	if result, _, _ := flotilla.Recorded(); string(result) != want {
		t.Fatalf("result %s", result)
	}
}

func TestNoPatchAndErrors(t *testing.T) {
	Handle(func(*Request) ([]Op, error) { return nil, nil })
	flotilla.Reset()
	if s := call([]byte(`{"object": {}, "cluster": {}}`)); s != flotilla.StatusOK {
		t.Fatalf("status %d", s)
	}
	if result, _, _ := flotilla.Recorded(); string(result) != `{"patch":[]}` {
		t.Fatalf("result %s", result)
	}
	if s := call([]byte(`[`)); s != flotilla.StatusError {
		t.Fatalf("malformed request: status %d", s)
	}
	if result, _, _ := flotilla.Recorded(); !strings.HasPrefix(string(result), "override request:") {
		t.Fatalf("result %s", result)
	}
}
