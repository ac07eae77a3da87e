
// InterpretReplica: the object's replicas are its label `label` when that holds a number, else
// spec.replicas, else 1. Other operations are not implemented (the customization routes only
// replicaResource here).
func init() {
	interpret.Handle(func(req *interpret.Request) (*interpret.Reply, error) {
		if req.Operation != "InterpretReplica" {
			return nil, fmt.Errorf("%s not implemented", req.Operation)
		}
		var object struct {
			Metadata struct {
				Labels map[string]string `json:"labels"`
			} `json:"metadata"`
			Spec struct {
				Replicas *int64 `json:"replicas"`
			} `json:"spec"`
		}
		if err := json.Unmarshal(req.Object, &object); err != nil {
			return nil, fmt.Errorf("object: %w", err)
		}
		replicas := int64(1)
		if object.Spec.Replicas != nil {
			replicas = *object.Spec.Replicas
		}
		if v, err := strconv.ParseInt(object.Metadata.Labels[label], 10, 64); err == nil {
			replicas = v
		}
		return &interpret.Reply{Replicas: interpret.Int64(replicas)}, nil
	})
}
