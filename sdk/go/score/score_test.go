package score

import (
	"encoding/binary"
	"strings"
	"testing"

	flotilla "flotilla.dev/sdk/go"
)

func TestScoresAreLittleEndianI64(t *testing.T) {
	flotilla.PushClusters([]byte(`{"generation": 1, "clusters": [{"metadata": {"name": "a"}}, {"metadata": {"name": "b"}}]}`))
	Handle(func(_ *flotilla.BindingRequest, cs []*flotilla.Cluster) ([]int64, error) {
		out := make([]int64, len(cs))
		for i, c := range cs {
			out[i] = map[string]int64{"a": 100, "b": -1}[c.Name]
		}
		return out, nil
	})
	rows := binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, 1), 0)
	flotilla.Reset()
	if s := call([]byte(`{}`), rows); s != flotilla.StatusOK {
		t.Fatalf("status %d", s)
	}
	_, out, _ := flotilla.Recorded()
	if len(out) != 16 || int64(binary.LittleEndian.Uint64(out)) != -1 || binary.LittleEndian.Uint64(out[8:]) != 100 {
		t.Fatalf("rows %v", out)
	}
}

func TestWrongScoreCountFails(t *testing.T) {
	flotilla.PushClusters([]byte(`{"generation": 1, "clusters": [{"metadata": {"name": "a"}}]}`))
	Handle(func(*flotilla.BindingRequest, []*flotilla.Cluster) ([]int64, error) { return nil, nil })
	flotilla.Reset()
	if s := call([]byte(`{}`), binary.LittleEndian.AppendUint32(nil, 0)); s != flotilla.StatusError {
		t.Fatalf("status %d", s)
	}
	if result, _, _ := flotilla.Recorded(); !strings.Contains(string(result), "returned 0 scores for 1 clusters") {
		t.Fatalf("result %s", result)
	}
}
