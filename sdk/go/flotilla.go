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
	"unsafe"
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

//go:wasmimport flotilla:host/v1 log
func hostLog(level int32, ptr uint32, n uint32)

//go:wasmimport flotilla:host/v1 set_result
func hostSetResult(ptr uint32, n uint32)

//go:wasmimport flotilla:host/v1 set_rows
func hostSetRows(ptr uint32, n uint32)

// ---------------------------------------------------------------------------------------------
// Memory: the host allocates input buffers through flotilla_alloc. Go's GC does not move objects;
// the map keeps each block reachable until flotilla_dealloc.

var blocks = map[uint32][]uint64{}

//go:wasmexport flotilla_abi_version
func abiVersion() int32 { return ABIVersion }

//go:wasmexport flotilla_alloc
func alloc(n uint32) uint32 {
	b := make([]uint64, (n+7)/8+1) // []uint64: 8-byte aligned; +1 so n == 0 gets a real block
	p := uint32(uintptr(unsafe.Pointer(&b[0])))
	blocks[p] = b
	return p
}

//go:wasmexport flotilla_dealloc
func dealloc(p uint32, n uint32) { delete(blocks, p) }

// Bytes views n bytes of linear memory at p (no copy). For the extension-point packages.
func Bytes(p, n uint32) []byte {
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(uintptr(p))), n)
}

func ptr(b []byte) uint32 {
	if len(b) == 0 {
		var one [1]byte
		return uint32(uintptr(unsafe.Pointer(&one[0])))
	}
	return uint32(uintptr(unsafe.Pointer(&b[0])))
}

// SetResult passes the call's JSON reply (or, with StatusError, the error message).
func SetResult(b []byte) { hostSetResult(ptr(b), uint32(len(b))) }

// SetRows passes the call's per-row binary reply.
func SetRows(b []byte) { hostSetRows(ptr(b), uint32(len(b))) }

// Log sends one line to the host's log (at most 1 KiB per line, 64 lines per call are kept).
func Log(level int32, msg string) {
	b := []byte(msg)
	hostLog(level, ptr(b), uint32(len(b)))
}

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

//go:wasmexport flotilla_init_v1
func initV1(p, n uint32) int32 {
	return Run(func() error {
		var req struct {
			Name   string          `json:"name"`
			Config json.RawMessage `json:"config"`
		}
		if err := json.Unmarshal(Bytes(p, n), &req); err != nil {
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

//go:wasmexport flotilla_clusters_v1
func clustersV1(p, n uint32) int32 {
	return Run(func() error {
		var req struct {
			Generation uint64            `json:"generation"`
			Clusters   []json.RawMessage `json:"clusters"`
		}
		if err := json.Unmarshal(Bytes(p, n), &req); err != nil {
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
	// Binding is the Karmada ResourceBindingSpec (work.karmada.io/v1alpha2), partly parsed.
	Binding BindingSpec `json:"binding"`
	// Placement is the placement in force (policy.karmada.io/v1alpha1 Placement, or {}).
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

// ReadBinding parses the request JSON at (p, n). For the extension-point packages.
func ReadBinding(p, n uint32) (*BindingRequest, error) {
	raw := append([]byte(nil), Bytes(p, n)...)
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

// IndexRows resolves n u32 cluster-index rows at p (filter, score). For the extension-point packages.
func IndexRows(p, n uint32) ([]*Cluster, error) {
	b := Bytes(p, 4*n)
	out := make([]*Cluster, n)
	for i := range out {
		c, err := cluster(binary.LittleEndian.Uint32(b[4*i:]))
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

// DetailRows decodes n 32-byte detail rows at p. For the extension-point packages.
func DetailRows(p, n uint32) ([]DetailRow, error) {
	b := Bytes(p, 32*n)
	out := make([]DetailRow, n)
	for i := range out {
		r := b[32*i:]
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
