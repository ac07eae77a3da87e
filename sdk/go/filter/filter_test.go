package filter

import (
	"encoding/binary"
	"testing"

	flotilla "flotilla.dev/sdk/go"
)

func rows(indices ...uint32) []byte {
	var b []byte
	for _, i := range indices {
		b = binary.LittleEndian.AppendUint32(b, i)
	}
	return b
}

func TestReasonsAreGroupedIntoVerdictBytes(t *testing.T) {
	flotilla.PushClusters([]byte(`{"generation": 1, "clusters": [{"metadata": {"name": "a"}}, {"metadata": {"name": "b", "labels": {"gpu": "1"}}}, {"metadata": {"name": "c"}}]}`))
	Handle(func(_ *flotilla.BindingRequest, cs []*flotilla.Cluster) ([]string, error) {
		out := make([]string, len(cs))
		for i, c := range cs {
			if c.Labels["gpu"] == "" {
				out[i] = "cluster(s) had no GPU"
			}
		}
		return out, nil
	})
	flotilla.Reset()
	if s := call([]byte(`{"binding": {}}`), rows(0, 1, 2)); s != flotilla.StatusOK {
		t.Fatalf("status %d", s)
	}
	result, verdicts, _ := flotilla.Recorded()
	if string(verdicts) != "\x01\x00\x01" || string(result) != `{"reasons":["cluster(s) had no GPU"]}` {
		t.Fatalf("verdicts %v, result %s", verdicts, result)
	}

	// All fit: rows only, no result.
	flotilla.Reset()
	if s := call([]byte(`{}`), rows(1)); s != flotilla.StatusOK {
		t.Fatalf("status %d", s)
	}
	if result, verdicts, _ := flotilla.Recorded(); string(verdicts) != "\x00" || result != nil {
		t.Fatalf("verdicts %v, result %s", verdicts, result)
	}
}

func TestMissingHandlerFails(t *testing.T) {
	Handle(nil)
	if s := call([]byte(`{}`), nil); s != flotilla.StatusError {
		t.Fatalf("status %d", s)
	}
}
