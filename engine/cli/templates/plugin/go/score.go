
// 100 for clusters labelled `label`, 0 for the others (scores are 0..100; the profile's weight
// multiplies them).
func init() {
	score.Handle(func(_ *flotilla.BindingRequest, clusters []*flotilla.Cluster) ([]int64, error) {
		out := make([]int64, len(clusters))
		for i, c := range clusters {
			if labelled(c) {
				out[i] = 100
			}
		}
		return out, nil
	})
}
