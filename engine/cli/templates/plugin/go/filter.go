
// Clusters labelled `label` do not fit; every other cluster does.
func init() {
	filter.Handle(func(_ *flotilla.BindingRequest, clusters []*flotilla.Cluster) ([]string, error) {
		reasons := make([]string, len(clusters))
		for i, c := range clusters {
			if labelled(c) {
				reasons[i] = "cluster(s) had label " + label
			}
		}
		return reasons, nil
	})
}
