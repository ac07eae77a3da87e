
// Keeps only the clusters labelled `label`, in the order given; when none is, keeps them all.
func init() {
	selection.Handle(func(_ *flotilla.BindingRequest, rows []flotilla.DetailRow) (selection.Result, error) {
		var keep, all []int
		for i, r := range rows {
			all = append(all, i)
			if labelled(r.Cluster) {
				keep = append(keep, i)
			}
		}
		if len(keep) == 0 {
			keep = all
		}
		return selection.Result{Selected: keep}, nil
	})
}
