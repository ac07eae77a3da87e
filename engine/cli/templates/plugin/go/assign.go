
// Divided bindings: every replica goes to the clusters labelled `label`, split evenly (the first
// take the remainder). Skips (the built-in assigners decide) for Duplicated bindings and when no
// selected cluster is labelled.
func init() {
	assign.Handle(func(req *flotilla.BindingRequest, rows []flotilla.DetailRow) (assign.Result, error) {
		var placement struct {
			ReplicaScheduling struct {
				Type string `json:"replicaSchedulingType"`
			} `json:"replicaScheduling"`
		}
		if len(req.Placement) > 0 {
			if err := json.Unmarshal(req.Placement, &placement); err != nil {
				return assign.Result{}, fmt.Errorf("placement: %w", err)
			}
		}
		var picked []int
		for i, r := range rows {
			if labelled(r.Cluster) {
				picked = append(picked, i)
			}
		}
		if placement.ReplicaScheduling.Type != "Divided" || len(picked) == 0 {
			return assign.Skip(), nil
		}
		n := int32(len(picked))
		out := make([]assign.Replicas, 0, len(picked))
		for k, row := range picked {
			r := req.Replicas / n
			if int32(k) < req.Replicas%n {
				r++
			}
			out = append(out, assign.Replicas{Row: row, Replicas: r})
		}
		return assign.Assigned(out...), nil
	})
}
