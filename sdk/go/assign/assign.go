// Package assign adds the replica-assignment extension point (flotilla_assign_v1) to a plugin.
package assign

import (
	flotilla "flotilla.dev/sdk/go"
)

// Result is an assign reply; build it with Assigned, Skip or Unschedulable.
type Result struct {
	pairs         [][2]int64
	skip          bool
	unschedulable string
}

// Replicas places n replicas on the row at position Row.
type Replicas struct {
	Row      int
	Replicas int32
}

// Assigned places replicas on rows (positions in this call's rows); zero entries may be omitted.
func Assigned(r ...Replicas) Result {
	pairs := make([][2]int64, 0, len(r))
	for _, x := range r {
		pairs = append(pairs, [2]int64{int64(x.Row), int64(x.Replicas)})
	}
	return Result{pairs: pairs}
}

// Skip: not this plugin's strategy; the profile's next assigner is asked.
func Skip() Result { return Result{skip: true} }

// Unschedulable: the replicas cannot be placed, for the given reason.
func Unschedulable(reason string) Result { return Result{unschedulable: reason} }

// Func divides req.Replicas over the selected rows (in selection order; req.Mode is "Steady" or
// "Fresh").
type Func func(req *flotilla.BindingRequest, rows []flotilla.DetailRow) (Result, error)

var handler Func

// Handle registers the assigner.
func Handle(fn Func) { handler = fn }

// call is the export's body: request JSON and rows in, status out (native tests call it too).
func call(request, rows []byte) int32 {
	return flotilla.Call(handler != nil, request, rows, flotilla.DecodeDetailRows, func(req *flotilla.BindingRequest, rows []flotilla.DetailRow) error {
		res, err := handler(req, rows)
		if err != nil {
			return err
		}
		switch {
		case res.skip:
			flotilla.SetResult([]byte(`"skip"`))
			return nil
		case res.unschedulable != "":
			return flotilla.SetJSON(map[string]string{"unschedulable": res.unschedulable})
		default:
			return flotilla.SetJSON(map[string][][2]int64{"assigned": res.pairs})
		}
	})
}
