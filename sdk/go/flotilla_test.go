package flotilla

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

const set = `{"generation": 7, "clusters": [
  {"metadata": {"name": "a", "labels": {"gpu": "yes"}}, "spec": {"region": "eu", "taints": [{"key": "k", "effect": "NoSchedule"}]},
   "status": {"resourceSummary": {"allocatable": {"cpu": "8", "memory": "16Gi"}, "allocated": {"cpu": "1500m"}, "allocating": {"cpu": "500m"}}}},
  {"metadata": {"name": "b"}, "unknown": {"ignored": true}}]}`

func push(t *testing.T) {
	t.Helper()
	if s := PushClusters([]byte(set)); s != StatusOK {
		t.Fatalf("PushClusters: status %d, result %q", s, recorded.result)
	}
}

func TestPushClustersParsesTheSetAndCallsTheHook(t *testing.T) {
	Reset()
	var seen uint64
	OnClusters(func(gen uint64, cs []*Cluster) error { seen = gen; return nil })
	defer OnClusters(nil)
	push(t)
	if seen != 7 || Generation() != 7 || len(Clusters()) != 2 {
		t.Fatalf("generation %d/%d, %d clusters", seen, Generation(), len(Clusters()))
	}
	a, b := Clusters()[0], Clusters()[1]
	if a.Index != 0 || a.Name != "a" || a.Labels["gpu"] != "yes" || a.Spec.Region != "eu" || a.Spec.Taints[0].Effect != "NoSchedule" {
		t.Fatalf("cluster a: %+v", a)
	}
	if b.Index != 1 || b.Name != "b" || !strings.Contains(string(b.Raw), "ignored") {
		t.Fatalf("cluster b: %+v", b)
	}
	if got := a.Free("cpu"); got != 6 {
		t.Fatalf("free cpu = %v, want 6", got)
	}
	if got := b.Free("cpu"); got != 0 {
		t.Fatalf("free cpu without a summary = %v", got)
	}
}

func TestPushClustersErrorsBecomeStatusError(t *testing.T) {
	Reset()
	if s := PushClusters([]byte(`{"clusters": 3}`)); s != StatusError || !strings.HasPrefix(string(recorded.result), "clusters request:") {
		t.Fatalf("status %d, result %q", s, recorded.result)
	}
	OnClusters(func(uint64, []*Cluster) error { return errors.New("no thanks") })
	defer OnClusters(nil)
	if s := PushClusters([]byte(set)); s != StatusError || string(recorded.result) != "no thanks" {
		t.Fatalf("status %d, result %q", s, recorded.result)
	}
}

func TestInitPassesNameAndConfig(t *testing.T) {
	var config string
	OnInit(func(name string, c json.RawMessage) error { config = name + " " + string(c); return nil })
	defer OnInit(nil)
	if s := Init([]byte(`{"name": "p", "config": {"label": "x"}}`)); s != StatusOK || config != `p {"label": "x"}` || Name() != "p" {
		t.Fatalf("status %d, config %q", s, config)
	}
	if s := Init([]byte(`{"name": "q"}`)); s != StatusOK || config != "q null" {
		t.Fatalf("absent config: status %d, config %q", s, config)
	}
	OnInit(func(string, json.RawMessage) error { return errors.New("config: bad") })
	Reset()
	if s := Init([]byte(`{"name": "q"}`)); s != StatusError || string(recorded.result) != "config: bad" {
		t.Fatalf("rejected config: status %d, result %q", s, recorded.result)
	}
}

func TestRunTurnsPanicsIntoErrors(t *testing.T) {
	Reset()
	if s := Run(func() error { panic("boom") }); s != StatusError || string(recorded.result) != "panic: boom" {
		t.Fatalf("status %d, result %q", s, recorded.result)
	}
}

func TestDecodeBinding(t *testing.T) {
	req, err := DecodeBinding([]byte(`{"binding": {"resource": {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "default", "name": "web"},
	  "replicas": 3, "replicaRequirements": {"resourceRequest": {"cpu": "500m"}}, "clusters": [{"name": "a", "replicas": 2}]},
	  "placement": {"replicaScheduling": {"replicaSchedulingType": "Divided"}}, "replicas": 3, "mode": "Fresh"}`))
	if err != nil {
		t.Fatal(err)
	}
	b := req.Binding
	if b.Resource.Kind != "Deployment" || b.Resource.Name != "web" || b.Replicas != 3 || b.ReplicaRequirements.ResourceRequest["cpu"] != "500m" || b.Clusters[0].Replicas != 2 {
		t.Fatalf("binding: %+v", b)
	}
	if req.Replicas != 3 || req.Mode != "Fresh" || !strings.Contains(string(req.Placement), "Divided") || len(req.AffinityTerm) != 0 || len(req.Raw) == 0 {
		t.Fatalf("request: %+v", req)
	}
	if _, err := DecodeBinding([]byte(`{"binding": [`)); err == nil || !strings.HasPrefix(err.Error(), "binding request:") {
		t.Fatalf("malformed: %v", err)
	}
}

func TestDecodeRows(t *testing.T) {
	push(t)
	idx := binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, 1), 0)
	cs, err := DecodeIndexRows(idx)
	if err != nil || len(cs) != 2 || cs[0].Name != "b" || cs[1].Name != "a" {
		t.Fatalf("index rows: %v %v", cs, err)
	}
	if _, err := DecodeIndexRows(binary.LittleEndian.AppendUint32(nil, 2)); err == nil || !strings.Contains(err.Error(), "row refers to cluster 2") {
		t.Fatalf("out of range: %v", err)
	}
	if _, err := DecodeIndexRows([]byte{1, 2, 3}); err == nil {
		t.Fatal("a partial row must fail")
	}
	row := make([]byte, DetailRowSize)
	binary.LittleEndian.PutUint32(row[0:], 1)
	binary.LittleEndian.PutUint32(row[4:], 1000)
	binary.LittleEndian.PutUint64(row[8:], uint64(^uint64(2))) // -3
	binary.LittleEndian.PutUint64(row[16:], 1<<40)
	binary.LittleEndian.PutUint64(row[24:], 5)
	rows, err := DecodeDetailRows(row)
	if err != nil || len(rows) != 1 {
		t.Fatalf("detail rows: %v %v", rows, err)
	}
	r := rows[0]
	if r.Cluster.Name != "b" || r.OverflowOrder != 1000 || r.Score != -3 || r.AllocatableReplicas != 1<<40 || r.AvailableReplicas != 5 {
		t.Fatalf("detail row: %+v", r)
	}
}

func TestCallIsTheSharedPrologue(t *testing.T) {
	push(t)
	rows := binary.LittleEndian.AppendUint32(nil, 0)
	Reset()
	if s := Call(false, []byte(`{}`), rows, DecodeIndexRows, nil); s != StatusError || string(recorded.result) != ErrNoHandler.Error() {
		t.Fatalf("no handler: %d %q", s, recorded.result)
	}
	if s := Call(true, []byte(`nope`), rows, DecodeIndexRows, nil); s != StatusError || !strings.HasPrefix(string(recorded.result), "binding request:") {
		t.Fatalf("bad JSON: %d %q", s, recorded.result)
	}
	if s := Call(true, []byte(`{}`), binary.LittleEndian.AppendUint32(nil, 9), DecodeIndexRows, nil); s != StatusError || !strings.Contains(string(recorded.result), "row refers to cluster 9") {
		t.Fatalf("bad row: %d %q", s, recorded.result)
	}
	var got []*Cluster
	s := Call(true, []byte(`{"binding": {"replicas": 2}}`), rows, DecodeIndexRows, func(req *BindingRequest, cs []*Cluster) error {
		if req.Binding.Replicas != 2 {
			return errors.New("replicas not decoded")
		}
		got = cs
		return SetJSON(map[string]int{"ok": 1})
	})
	if s != StatusOK || len(got) != 1 || got[0].Name != "a" || string(recorded.result) != `{"ok":1}` {
		t.Fatalf("handler: %d %q %v", s, recorded.result, got)
	}
}

func TestParseQuantity(t *testing.T) {
	for in, want := range map[string]float64{"2": 2, "500m": 0.5, "1.5Gi": 1.5 * (1 << 30), "3k": 3000, "1e3": 1000, " 4 ": 4, "64Mi": 64 << 20} {
		if got, ok := ParseQuantity(in); !ok || got != want {
			t.Errorf("ParseQuantity(%q) = %v, %v; want %v", in, got, ok, want)
		}
	}
	for _, in := range []string{"", "x", "Gi"} {
		if _, ok := ParseQuantity(in); ok {
			t.Errorf("ParseQuantity(%q) should fail", in)
		}
	}
}

func TestLogIsRecorded(t *testing.T) {
	Reset()
	Logf("hello %d", 3)
	if _, _, logs := Recorded(); len(logs) != 1 || logs[0] != "hello 3" {
		t.Fatalf("logs %q", logs)
	}
}
