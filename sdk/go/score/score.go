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

//go:wasmexport flotilla_score_v1
func scoreV1(jp, jn, rp, rn uint32) int32 {
	return flotilla.Run(func() error {
		if handler == nil {
			return flotilla.ErrNoHandler
		}
		req, err := flotilla.ReadBinding(jp, jn)
		if err != nil {
			return err
		}
		cs, err := flotilla.IndexRows(rp, rn)
		if err != nil {
			return err
		}
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
