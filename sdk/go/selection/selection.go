// Package selection adds the select extension point (flotilla_select_v1) to a plugin.
package selection

import (
	flotilla "flotilla.dev/sdk/go"
)

// Result is a select reply: either the chosen row positions (in the order the assign step should
// see them) or a failure message.
type Result struct {
	Selected []int
	Failed   string
}

// Func picks clusters from the feasible rows, given in Karmada's canonical order (overflow order
// asc, score desc, available replicas desc, name asc).
type Func func(req *flotilla.BindingRequest, rows []flotilla.DetailRow) (Result, error)

var handler Func

// Handle registers the selector.
func Handle(fn Func) { handler = fn }

// call is the export's body: request JSON and rows in, status out (native tests call it too).
func call(request, rows []byte) int32 {
	return flotilla.Call(handler != nil, request, rows, flotilla.DecodeDetailRows, func(req *flotilla.BindingRequest, rows []flotilla.DetailRow) error {
		res, err := handler(req, rows)
		if err != nil {
			return err
		}
		if res.Failed != "" {
			return flotilla.SetJSON(map[string]string{"failed": res.Failed})
		}
		sel := res.Selected
		if sel == nil {
			sel = []int{}
		}
		return flotilla.SetJSON(map[string][]int{"selected": sel})
	})
}
