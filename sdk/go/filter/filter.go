// Package filter adds the filter extension point (flotilla_filter_v1) to a plugin.
package filter

import (
	"encoding/json"

	flotilla "flotilla.dev/sdk/go"
)

// Func decides, for each feasible cluster (in name order), whether it fits: it returns one reason
// per cluster, "" for fit. Equal reasons are reported together, Karmada-style
// ("0/3 clusters are available: 2 cluster(s) had no GPU.").
type Func func(req *flotilla.BindingRequest, clusters []*flotilla.Cluster) (reasons []string, err error)

var handler Func

// Handle registers the filter.
func Handle(fn Func) { handler = fn }

// call is the export's body: request JSON and rows in, status out (native tests call it too).
func call(request, rows []byte) int32 {
	return flotilla.Call(handler != nil, request, rows, flotilla.DecodeIndexRows, func(req *flotilla.BindingRequest, cs []*flotilla.Cluster) error {
		reasons, err := handler(req, cs)
		if err != nil {
			return err
		}
		verdicts := make([]byte, len(cs))
		var distinct []string
		index := map[string]int{}
		for i := range cs {
			if i >= len(reasons) || reasons[i] == "" {
				continue
			}
			k, ok := index[reasons[i]]
			if !ok {
				if len(distinct) == 255 {
					k = 255 // more distinct reasons than a byte holds: fold into the last
				} else {
					distinct = append(distinct, reasons[i])
					k = len(distinct)
					index[reasons[i]] = k
				}
			}
			verdicts[i] = byte(k)
		}
		flotilla.SetRows(verdicts)
		if len(distinct) > 0 {
			b, _ := json.Marshal(struct {
				Reasons []string `json:"reasons"`
			}{distinct})
			flotilla.SetResult(b)
		}
		return nil
	})
}
