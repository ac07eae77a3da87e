// Package flotilla is the Go SDK for Flotilla plugins (plugin ABI v1, see sdk/ABI.md).
//
// Build a plugin as a wasip1 reactor:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o plugin.wasm .
//
// This package exports the ABI's required functions (flotilla_abi_version, flotilla_alloc,
// flotilla_dealloc, flotilla_init_v1, flotilla_clusters_v1), keeps the pushed cluster set, and
// passes replies to the host. Each extension point lives in its own package (filter, score,
// selection, assign, override); importing one adds its export to the module, so a plugin exports
// exactly the points it implements. Register the handler from main's init or main:
//
//	func init() { score.Handle(myScore) }
//	func main() {}
package flotilla

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ABIVersion is the plugin ABI this SDK implements.
const ABIVersion = 1

// Status codes returned by the flotilla_*_v1 exports.
const (
	StatusOK    int32 = 0
	StatusError int32 = 1
)

// Log levels for Log.
const (
	LevelError int32 = 0
	LevelWarn  int32 = 1
	LevelInfo  int32 = 2
	LevelDebug int32 = 3
)

// SetResult passes the call's JSON reply (or, with StatusError, the error message).
func SetResult(b []byte) { hostSetResult(b) }

// SetRows passes the call's per-row binary reply.
func SetRows(b []byte) { hostSetRows(b) }

// Log sends one line to the host's log (at most 1 KiB per line, 64 lines per call are kept).
func Log(level int32, msg string) { hostLog(level, []byte(msg)) }

// Logf formats and logs at LevelInfo.
func Logf(format string, args ...any) { Log(LevelInfo, fmt.Sprintf(format, args...)) }

// Run calls fn and turns its error or panic into StatusError with the message as the result.
// For the extension-point packages.
func Run(fn func() error) (status int32) {
	defer func() {
		if r := recover(); r != nil {
			SetResult([]byte(fmt.Sprint("panic: ", r)))
			status = StatusError
		}
	}()
	if err := fn(); err != nil {
		SetResult([]byte(err.Error()))
		return StatusError
	}
	return StatusOK
}

// ---------------------------------------------------------------------------------------------
// Init and the cluster set.

var (
	pluginName string
	onInit     func(name string, config json.RawMessage) error
	onClusters func(generation uint64, clusters []*Cluster) error
	generation uint64
	clusters   []*Cluster
)

// OnInit registers the config handler: called once per instance with the plugin's name in the
// profile and its config JSON ("null" when absent). Returning an error rejects the config (the
// profile fails to load).
func OnInit(fn func(name string, config json.RawMessage) error) { onInit = fn }

// OnClusters registers a hook called after each cluster-set push, for precomputing per-cluster
// data once per generation rather than per binding.
func OnClusters(fn func(generation uint64, clusters []*Cluster) error) { onClusters = fn }

// Name is the plugin's name in the profile (after init).
func Name() string { return pluginName }

// Generation is the generation of the cluster set held.
func Generation() uint64 { return generation }

// Clusters is the cluster set held, sorted by name; rows index into it.
func Clusters() []*Cluster { return clusters }

// Init is the body of flotilla_init_v1: it decodes the InitRequest JSON and calls the OnInit
// handler. The wasm export calls it; native unit tests of a plugin may call it directly.
func Init(request []byte) int32 {
	return Run(func() error {
		var req struct {
			Name   string          `json:"name"`
			Config json.RawMessage `json:"config"`
		}
		if err := json.Unmarshal(request, &req); err != nil {
			return fmt.Errorf("init request: %w", err)
		}
		pluginName = req.Name
		if len(req.Config) == 0 {
			req.Config = json.RawMessage("null")
		}
		if onInit != nil {
			return onInit(req.Name, req.Config)
		}
		return nil
	})
}

// PushClusters is the body of flotilla_clusters_v1: it decodes the ClustersRequest JSON, keeps
// the set and calls the OnClusters hook. The wasm export calls it; native unit tests of a plugin
// may call it directly.
func PushClusters(request []byte) int32 {
	return Run(func() error {
		var req struct {
			Generation uint64            `json:"generation"`
			Clusters   []json.RawMessage `json:"clusters"`
		}
		if err := json.Unmarshal(request, &req); err != nil {
			return fmt.Errorf("clusters request: %w", err)
		}
		set := make([]*Cluster, len(req.Clusters))
		for i, raw := range req.Clusters {
			var w wireCluster
			if err := json.Unmarshal(raw, &w); err != nil {
				return fmt.Errorf("cluster %d: %w", i, err)
			}
			set[i] = &Cluster{
				Index: i, Name: w.Metadata.Name, Labels: w.Metadata.Labels, Annotations: w.Metadata.Annotations,
				Spec: w.Spec, Status: w.Status, Raw: raw,
			}
		}
		generation, clusters = req.Generation, set
		if onClusters != nil {
			return onClusters(generation, clusters)
		}
		return nil
	})
}

// Cluster is a Karmada Cluster (cluster.karmada.io/v1alpha1), with the fields plugins commonly
// read parsed; Raw holds the whole object for anything else.
type Cluster struct {
	Index       int // position in the pushed set
	Name        string
	Labels      map[string]string
	Annotations map[string]string
	Spec        ClusterSpec
	Status      ClusterStatus
	Raw         json.RawMessage
}

// ClusterSpec is the part of a Cluster's spec the SDK parses.
type ClusterSpec struct {
	Provider string   `json:"provider,omitempty"`
	Region   string   `json:"region,omitempty"`
	Zones    []string `json:"zones,omitempty"`
	Taints   []Taint  `json:"taints,omitempty"`
}

// Taint is a Kubernetes taint.
type Taint struct {
	Key    string `json:"key"`
	Value  string `json:"value,omitempty"`
	Effect string `json:"effect"`
}

// ClusterStatus is the part of a Cluster's status the SDK parses.
type ClusterStatus struct {
	KubernetesVersion string           `json:"kubernetesVersion,omitempty"`
	ResourceSummary   *ResourceSummary `json:"resourceSummary,omitempty"`
}

// ResourceSummary holds resource quantities as Kubernetes quantity strings ("8", "32Gi", "500m").
type ResourceSummary struct {
	Allocatable map[string]string `json:"allocatable,omitempty"`
	Allocating  map[string]string `json:"allocating,omitempty"`
	Allocated   map[string]string `json:"allocated,omitempty"`
}

// Free is allocatable − allocated − allocating of a resource, as a number (0 when unknown).
func (c *Cluster) Free(resource string) float64 {
	rs := c.Status.ResourceSummary
	if rs == nil {
		return 0
	}
	q := func(m map[string]string) float64 { v, _ := ParseQuantity(m[resource]); return v }
	return q(rs.Allocatable) - q(rs.Allocated) - q(rs.Allocating)
}

type wireCluster struct {
	Metadata struct {
		Name        string            `json:"name"`
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Spec   ClusterSpec   `json:"spec"`
	Status ClusterStatus `json:"status"`
}

// ParseQuantity parses a Kubernetes quantity ("2", "500m", "1.5Gi", "3k", "1e3").
func ParseQuantity(s string) (float64, bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, false
	}
	mult := 1.0
	for _, suf := range []struct {
		s string
		m float64
	}{{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40}, {"Pi", 1 << 50}, {"Ei", 1 << 60},
		{"n", 1e-9}, {"u", 1e-6}, {"m", 1e-3}, {"k", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12}, {"P", 1e15}, {"E", 1e18}} {
		if strings.HasSuffix(s, suf.s) {
			s, mult = strings.TrimSuffix(s, suf.s), suf.m
			break
		}
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, false
	}
	return v * mult, true
}

// ---------------------------------------------------------------------------------------------
// Requests and rows.

// BindingRequest is the JSON of a filter/score/select/assign call.
type BindingRequest struct {
	// Binding is the Karmada ResourceBindingSpec (work.karmada.io/v1alpha2) without its
	// placement (sent once, as Placement), partly parsed.
	Binding BindingSpec `json:"binding"`
	// Placement is the binding's placement (policy.karmada.io/v1alpha1 Placement, or {}).
	Placement json.RawMessage `json:"placement"`
	// AffinityTerm is the clusterAffinities term being tried, if any.
	AffinityTerm json.RawMessage `json:"affinityTerm,omitempty"`
	// Replicas and Mode: assign only.
	Replicas int32  `json:"replicas,omitempty"`
	Mode     string `json:"mode,omitempty"`
	// Raw is the whole request JSON (a copy; keep it if you like).
	Raw json.RawMessage `json:"-"`
}

// BindingSpec is the part of a ResourceBindingSpec the SDK parses; use Raw for the rest.
type BindingSpec struct {
	Resource struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Namespace  string `json:"namespace,omitempty"`
		Name       string `json:"name"`
	} `json:"resource"`
	Replicas            int32 `json:"replicas,omitempty"`
	ReplicaRequirements *struct {
		ResourceRequest map[string]string `json:"resourceRequest,omitempty"`
	} `json:"replicaRequirements,omitempty"`
	Clusters []struct {
		Name     string `json:"name"`
		Replicas int32  `json:"replicas,omitempty"`
	} `json:"clusters,omitempty"`
}

// DecodeBinding parses a request's JSON (copied, so the request may keep Raw).
func DecodeBinding(b []byte) (*BindingRequest, error) {
	raw := append([]byte(nil), b...)
	req := &BindingRequest{Raw: raw}
	if err := json.Unmarshal(raw, req); err != nil {
		return nil, fmt.Errorf("binding request: %w", err)
	}
	return req, nil
}

func cluster(i uint32) (*Cluster, error) {
	if int(i) >= len(clusters) {
		return nil, fmt.Errorf("row refers to cluster %d, but the set (generation %d) has %d", i, generation, len(clusters))
	}
	return clusters[i], nil
}

// IndexRowSize and DetailRowSize are the sizes of the two row kinds, in bytes.
const (
	IndexRowSize  = 4
	DetailRowSize = 32
)

// DecodeIndexRows resolves u32 cluster-index rows (filter, score) against the pushed set.
func DecodeIndexRows(b []byte) ([]*Cluster, error) {
	if len(b)%IndexRowSize != 0 {
		return nil, fmt.Errorf("index rows: %d bytes is not a multiple of %d", len(b), IndexRowSize)
	}
	out := make([]*Cluster, len(b)/IndexRowSize)
	for i := range out {
		c, err := cluster(binary.LittleEndian.Uint32(b[IndexRowSize*i:]))
		if err != nil {
			return nil, err
		}
		out[i] = c
	}
	return out, nil
}

// DetailRow is a select/assign row: a feasible cluster with its scheduling figures.
type DetailRow struct {
	Cluster             *Cluster
	OverflowOrder       uint32 // 0 primary affinity, i+1 for the i-th overflow tier, 1000 none
	Score               int64  // total weighted score
	AllocatableReplicas int64  // estimator
	AvailableReplicas   int64  // allocatable + currently assigned here
}

// DecodeDetailRows decodes 32-byte detail rows (select, assign) against the pushed set.
func DecodeDetailRows(b []byte) ([]DetailRow, error) {
	if len(b)%DetailRowSize != 0 {
		return nil, fmt.Errorf("detail rows: %d bytes is not a multiple of %d", len(b), DetailRowSize)
	}
	out := make([]DetailRow, len(b)/DetailRowSize)
	for i := range out {
		r := b[DetailRowSize*i:]
		c, err := cluster(binary.LittleEndian.Uint32(r))
		if err != nil {
			return nil, err
		}
		out[i] = DetailRow{
			Cluster:             c,
			OverflowOrder:       binary.LittleEndian.Uint32(r[4:]),
			Score:               int64(binary.LittleEndian.Uint64(r[8:])),
			AllocatableReplicas: int64(binary.LittleEndian.Uint64(r[16:])),
			AvailableReplicas:   int64(binary.LittleEndian.Uint64(r[24:])),
		}
	}
	return out, nil
}

// Call is the prologue every filter/score/select/assign export shares: with a handler
// registered (ok), it decodes the request JSON and the rows (DecodeIndexRows or
// DecodeDetailRows), then runs fn; a missing handler, a decoding error, fn's error or a panic
// becomes StatusError with the message. For the extension-point packages.
func Call[R any](ok bool, request, rows []byte, decode func([]byte) (R, error), fn func(*BindingRequest, R) error) int32 {
	return Run(func() error {
		if !ok {
			return ErrNoHandler
		}
		req, err := DecodeBinding(request)
		if err != nil {
			return err
		}
		r, err := decode(rows)
		if err != nil {
			return err
		}
		return fn(req, r)
	})
}

// ErrNoHandler is returned when an extension point's export is called without a handler.
var ErrNoHandler = errors.New("no handler registered for this extension point")

// SetJSON marshals v and passes it with SetResult.
func SetJSON(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	SetResult(b)
	return nil
}
