package selection

import (
	"encoding/binary"
	"testing"

	flotilla "flotilla.dev/sdk/go"
)

func TestRepliesHaveTheDocumentedShape(t *testing.T) {
	flotilla.PushClusters([]byte(`{"generation": 1, "clusters": [{"metadata": {"name": "a"}}]}`))
	row := make([]byte, flotilla.DetailRowSize)
	binary.LittleEndian.PutUint64(row[8:], 42)
	for _, c := range []struct {
		res  Result
		want string
	}{
		{Result{Selected: []int{0}}, `{"selected":[0]}`},
		{Result{}, `{"selected":[]}`},
		{Result{Failed: "no group fits"}, `{"failed":"no group fits"}`},
	} {
		Handle(func(_ *flotilla.BindingRequest, rows []flotilla.DetailRow) (Result, error) {
			if len(rows) != 1 || rows[0].Score != 42 {
				t.Fatalf("rows %+v", rows)
			}
			return c.res, nil
		})
		flotilla.Reset()
		if s := call([]byte(`{}`), row); s != flotilla.StatusOK {
			t.Fatalf("status %d", s)
		}
		if result, _, _ := flotilla.Recorded(); string(result) != c.want {
			t.Errorf("result %s, want %s", result, c.want)
		}
	}
}
