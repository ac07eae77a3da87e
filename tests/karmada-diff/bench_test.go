package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// BenchmarkKarmadaSchedule benchmarks Karmada's scheduler core on the scenario files named by
// KARMADA_DIFF_BENCH (comma-separated JSONL files, written by flotilla's side-by-side bench:
// `cargo bench -p flotilla-tests --bench karmada_side_by_side` leaves them in its output dir).
//
//	KARMADA_DIFF_BENCH=a.jsonl,b.jsonl go test -run '^$' -bench KarmadaSchedule -benchtime 3s
func BenchmarkKarmadaSchedule(b *testing.B) {
	files := os.Getenv("KARMADA_DIFF_BENCH")
	if files == "" {
		b.Skip("KARMADA_DIFF_BENCH not set")
	}
	o, err := newOracle()
	if err != nil {
		b.Fatal(err)
	}
	for _, p := range strings.Split(files, ",") {
		scs, err := loadScenarios(p)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(filepath.Base(p), func(b *testing.B) { benchScenarios(b, o, scs) })
	}
}
