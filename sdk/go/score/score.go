// Package score adds the score extension point (flotilla_score_v1) to a plugin.
package score

import (
	"encoding/binary"
	"fmt"

	flotilla "flotilla.dev/sdk/go"
)

// Func scores each feasible cluster (in name order), one score per cluster, normally in 0..=100;
// the profile's weight multiplies it.
type Func func(req *flotilla.BindingRequest, clusters []*flotilla.Cluster) ([]int64, error)

var handler Func

// Handle registers the scorer.
func Handle(fn Func) { handler = fn }

// call is the export's body: request JSON and rows in, status out (native tests call it too).
func call(request, rows []byte) int32 {
	return flotilla.Call(handler != nil, request, rows, flotilla.DecodeIndexRows, func(req *flotilla.BindingRequest, cs []*flotilla.Cluster) error {
		scores, err := handler(req, cs)
		if err != nil {
			return err
		}
		if len(scores) != len(cs) {
			return fmt.Errorf("scorer returned %d scores for %d clusters", len(scores), len(cs))
		}
		out := make([]byte, 8*len(scores))
		for i, s := range scores {
			binary.LittleEndian.PutUint64(out[8*i:], uint64(s))
		}
		flotilla.SetRows(out)
		return nil
	})
}
