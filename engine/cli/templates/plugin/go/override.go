
// Labels the manifest sent to each cluster with `label: <cluster name>` (JSON Patch add; the
// manifest's metadata.labels must exist, as it does in the scenario).
func init() {
	override.Handle(func(req *override.Request) ([]override.Op, error) {
		var object struct {
			Metadata struct {
				Labels map[string]string `json:"labels"`
			} `json:"metadata"`
		}
		var cluster struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(req.Object, &object); err != nil {
			return nil, fmt.Errorf("object: %w", err)
		}
		if err := json.Unmarshal(req.Cluster, &cluster); err != nil {
			return nil, fmt.Errorf("cluster: %w", err)
		}
		if object.Metadata.Labels == nil {
			return nil, nil
		}
		path := "/metadata/labels/" + strings.ReplaceAll(strings.ReplaceAll(label, "~", "~0"), "/", "~1")
		return []override.Op{{Op: "add", Path: path, Value: cluster.Metadata.Name}}, nil
	})
}
