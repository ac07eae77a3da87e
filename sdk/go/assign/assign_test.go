package assign

import (
	"encoding/binary"
	"testing"

	flotilla "flotilla.dev/sdk/go"
)

func detail(index uint32, available int64) []byte {
	b := make([]byte, flotilla.DetailRowSize)
	binary.LittleEndian.PutUint32(b, index)
	binary.LittleEndian.PutUint32(b[4:], 1000)
	binary.LittleEndian.PutUint64(b[24:], uint64(available))
	return b
}

func TestRepliesHaveTheDocumentedShape(t *testing.T) {
	flotilla.PushClusters([]byte(`{"generation": 1, "clusters": [{"metadata": {"name": "a"}}, {"metadata": {"name": "b"}}]}`))
	rows := append(detail(1, 4), detail(0, 9)...)
	for _, c := range []struct {
		res  Result
		want string
	}{
		{Assigned(Replicas{Row: 0, Replicas: 4}, Replicas{Row: 1, Replicas: 2}), `{"assigned":[[0,4],[1,2]]}`},
		{Assigned(), `{"assigned":[]}`},
		{Skip(), `"skip"`},
		{Unschedulable("too big"), `{"unschedulable":"too big"}`},
	} {
		var got []flotilla.DetailRow
		var replicas int32
		Handle(func(req *flotilla.BindingRequest, r []flotilla.DetailRow) (Result, error) {
			got, replicas = r, req.Replicas
			return c.res, nil
		})
		flotilla.Reset()
		if s := call([]byte(`{"binding": {}, "placement": {}, "replicas": 6, "mode": "Steady"}`), rows); s != flotilla.StatusOK {
			t.Fatalf("status %d", s)
		}
		if result, _, _ := flotilla.Recorded(); string(result) != c.want {
			t.Errorf("result %s, want %s", result, c.want)
		}
		if replicas != 6 || len(got) != 2 || got[0].Cluster.Name != "b" || got[0].AvailableReplicas != 4 || got[1].Cluster.Name != "a" || got[1].OverflowOrder != 1000 {
			t.Fatalf("request: replicas %d, rows %+v", replicas, got)
		}
	}
}
