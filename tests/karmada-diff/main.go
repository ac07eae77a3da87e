// Command karmada-diff is the oracle for flotilla's differential tests: it runs Karmada's own
// scheduler core (generic scheduler, in-tree filter/score plugins, general estimator, spread
// constraints, division and Webster helpers, imported as a normal Go module) on scheduling
// scenarios and prints the placements.
//
// A scenario is one JSON object per line (Karmada's own JSON shapes):
//
//	{"name": "...", "spec": ResourceBindingSpec, "status": ResourceBindingStatus, "clusters": [Cluster, ...]}
//
// Modes:
//
//	karmada-diff run   < scenarios.jsonl  > results.jsonl   one result line per scenario line, flushed per line
//	karmada-diff bench [-min 3s] FILE...                    per-binding time of the Go core on each file
//	karmada-diff version                                    the Karmada module version linked in
//
// A result is {"name", "clusters": [{name, replicas}] (success, sorted by name) | "failure": {reason, message},
// "observedAffinity"} or {"name", "invalid": "..."} when the placement is not one Karmada's webhook
// would admit (defaults not applied, or ValidatePlacement errors): the generator must only produce
// admitted placements.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/klog/v2"

	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/karmada-io/karmada/pkg/features"
)

func main() {
	// Multi-component workloads (binding.spec.components) are scheduled as Karmada does with
	// this gate on, which is how flotilla always schedules them. It changes nothing for bindings
	// without components.
	if err := features.FeatureGate.Set("MultiplePodTemplatesScheduling=true"); err != nil {
		fmt.Fprintln(os.Stderr, "karmada-diff:", err)
		os.Exit(1)
	}
	klog.LogToStderr(false)
	klog.SetOutput(io.Discard)
	if len(os.Args) < 2 {
		usage()
	}
	switch os.Args[1] {
	case "run":
		if err := runStream(os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "karmada-diff:", err)
			os.Exit(1)
		}
	case "bench":
		fs := flag.NewFlagSet("bench", flag.ExitOnError)
		min := fs.Duration("min", 0, "minimum measuring time per file (default: Go's -benchtime, 1s)")
		_ = fs.Parse(os.Args[2:])
		if err := benchFiles(fs.Args(), *min, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "karmada-diff:", err)
			os.Exit(1)
		}
	case "version":
		fmt.Println(karmadaVersion())
	default:
		usage()
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: karmada-diff run < scenarios.jsonl | karmada-diff bench [-min 3s] FILE... | karmada-diff version")
	os.Exit(2)
}

func karmadaVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, m := range info.Deps {
			if m.Path == "github.com/karmada-io/karmada" {
				return m.Path + " " + m.Version
			}
		}
	}
	return "github.com/karmada-io/karmada (unknown version)"
}

// Result is one scenario's outcome.
type Result struct {
	Name             string                       `json:"name"`
	Clusters         []workv1alpha2.TargetCluster `json:"clusters,omitempty"`
	Failure          *Failure                     `json:"failure,omitempty"`
	ObservedAffinity string                       `json:"observedAffinity"`
	Invalid          string                       `json:"invalid,omitempty"`
}

// Failure is the Scheduled=False condition Karmada would write.
type Failure struct {
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

func runStream(in io.Reader, out io.Writer) error {
	s, err := newOracle()
	if err != nil {
		return err
	}
	r := bufio.NewReaderSize(in, 1<<20)
	w := bufio.NewWriter(out)
	enc := json.NewEncoder(w)
	for {
		line, err := r.ReadBytes('\n')
		line = bytes.TrimSpace(line)
		if len(line) > 0 {
			sc, perr := decodeScenario(line)
			var res Result
			if perr != nil {
				res = Result{Invalid: "decode: " + perr.Error()}
			} else {
				res = s.evaluate(sc)
			}
			if err := enc.Encode(res); err != nil {
				return err
			}
			if err := w.Flush(); err != nil {
				return err
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func decodeScenario(line []byte) (*Scenario, error) {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields() // a field Karmada does not know is a scenario-format bug, not something to ignore
	var sc Scenario
	if err := dec.Decode(&sc); err != nil {
		return nil, err
	}
	return &sc, nil
}

func (o *oracle) evaluate(sc *Scenario) Result {
	if msg := admissionProblems(sc); msg != "" {
		return Result{Name: sc.Name, Invalid: msg}
	}
	for i := range sc.Clusters {
		if err := storeCluster(&sc.Clusters[i]); err != nil {
			return Result{Name: sc.Name, Invalid: err.Error()}
		}
	}
	clusters, observed, err := o.schedule(sc)
	res := Result{Name: sc.Name, ObservedAffinity: observed}
	if err != nil {
		reason, message := conditionOf(err)
		res.Failure = &Failure{Reason: reason, Message: message}
		return res
	}
	out := make([]workv1alpha2.TargetCluster, 0, len(clusters))
	for _, c := range clusters {
		out = append(out, workv1alpha2.TargetCluster{Name: c.Name, Replicas: c.Replicas})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	res.Clusters = out
	return res
}

// admissionProblems reports why Karmada's PropagationPolicy webhook would not have produced this
// placement: its defaulting would change it, or ValidatePlacement rejects it.
func admissionProblems(sc *Scenario) string {
	p := sc.Spec.Placement
	if p == nil {
		return "spec.placement is nil (the scheduler never sees such a binding)"
	}
	defaulted := p.DeepCopy()
	applyWebhookDefaults(defaulted)
	if !equality.Semantic.DeepEqual(defaulted, p) {
		a, _ := json.Marshal(p)
		b, _ := json.Marshal(defaulted)
		return fmt.Sprintf("webhook defaults not applied: %s -> %s", a, b)
	}
	if errs := validatePlacement(*p, field.NewPath("spec", "placement")); len(errs) > 0 {
		msgs := make([]string, 0, len(errs))
		for _, e := range errs {
			msgs = append(msgs, e.Error())
		}
		return "rejected by ValidatePlacement: " + strings.Join(msgs, "; ")
	}
	return ""
}
