package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"testing"
	"time"
)

// loadScenarios reads a JSONL scenario file (the same file the Rust side schedules).
func loadScenarios(path string) ([]*Scenario, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []*Scenario
	r := bufio.NewReaderSize(f, 1<<20)
	for {
		line, err := r.ReadBytes('\n')
		line = bytes.TrimSpace(line)
		if len(line) > 0 {
			sc, derr := decodeScenario(line)
			if derr != nil {
				return nil, fmt.Errorf("%s: scenario %d: %w", path, len(out)+1, derr)
			}
			for i := range sc.Clusters {
				if err := storeCluster(&sc.Clusters[i]); err != nil {
					return nil, err
				}
			}
			out = append(out, sc)
		}
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// benchScenarios measures one scheduling decision per iteration, cycling over the scenarios.
// Decoding is outside the timer; the per-call cluster snapshot (Karmada deep-copies the cluster
// list on every Schedule call) is inside, as it is in Karmada's scheduler.
func benchScenarios(b *testing.B, o *oracle, scs []*Scenario) {
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_, _, _ = o.schedule(scs[i%len(scs)])
	}
}

func benchFiles(paths []string, min time.Duration, out io.Writer) error {
	if min > 0 {
		testing.Init()
		if err := setBenchtime(min); err != nil {
			return err
		}
	}
	o, err := newOracle()
	if err != nil {
		return err
	}
	enc := json.NewEncoder(out)
	for _, p := range paths {
		scs, err := loadScenarios(p)
		if err != nil {
			return err
		}
		if len(scs) == 0 {
			return fmt.Errorf("%s: no scenarios", p)
		}
		r := testing.Benchmark(func(b *testing.B) { benchScenarios(b, o, scs) })
		if err := enc.Encode(map[string]any{
			"file":           p,
			"scenarios":      len(scs),
			"clusters":       len(scs[0].Clusters),
			"iterations":     r.N,
			"nsPerBinding":   float64(r.T.Nanoseconds()) / float64(r.N),
			"allocsPerOp":    r.AllocsPerOp(),
			"bytesPerOp":     r.AllocedBytesPerOp(),
			"karmadaVersion": karmadaVersion(),
		}); err != nil {
			return err
		}
	}
	return nil
}

// setBenchtime sets testing's -test.benchtime flag (the only way to set it outside `go test`).
func setBenchtime(d time.Duration) error {
	fl := flagLookup("test.benchtime")
	if fl == nil {
		return fmt.Errorf("test.benchtime flag not registered")
	}
	return fl.Value.Set(d.String())
}
