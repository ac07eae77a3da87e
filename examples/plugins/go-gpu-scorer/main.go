// go-gpu-scorer: a Flotilla score plugin in Go. Clusters with more free GPUs score higher.
//
// A cluster's GPU count is its free capacity of the configured resource (status.resourceSummary
// allocatable − allocated − allocating), or, when the cluster reports none, the number in the
// configured label. Scores are 0..100 relative to the best cluster of the set, computed once per
// cluster-set generation, not per binding.
//
// Config: {"resource": "nvidia.com/gpu", "label": "flotilla.dev/gpu-count"} (both optional).
package main

import (
	"encoding/json"
	"fmt"
	"strconv"

	flotilla "flotilla.dev/sdk/go"
	"flotilla.dev/sdk/go/score"
)

type config struct {
	Resource string `json:"resource"`
	Label    string `json:"label"`
}

var (
	cfg    = config{Resource: "nvidia.com/gpu", Label: "flotilla.dev/gpu-count"}
	scores []int64 // per cluster index, for the current generation
)

func gpus(c *flotilla.Cluster) float64 {
	if n := c.Free(cfg.Resource); n > 0 {
		return n
	}
	if v, err := strconv.ParseFloat(c.Labels[cfg.Label], 64); err == nil && v > 0 {
		return v
	}
	return 0
}

func init() {
	flotilla.OnInit(func(name string, raw json.RawMessage) error {
		if err := json.Unmarshal(raw, &cfg); err != nil {
			return fmt.Errorf("config: %w", err)
		}
		if cfg.Resource == "" && cfg.Label == "" {
			return fmt.Errorf("config: set resource or label")
		}
		return nil
	})
	flotilla.OnClusters(func(gen uint64, clusters []*flotilla.Cluster) error {
		best := 0.0
		for _, c := range clusters {
			best = max(best, gpus(c))
		}
		scores = make([]int64, len(clusters))
		for i, c := range clusters {
			if best > 0 {
				scores[i] = int64(100 * gpus(c) / best)
			}
		}
		return nil
	})
	score.Handle(func(_ *flotilla.BindingRequest, clusters []*flotilla.Cluster) ([]int64, error) {
		out := make([]int64, len(clusters))
		for i, c := range clusters {
			out[i] = scores[c.Index]
		}
		return out, nil
	})
}

func main() {}
