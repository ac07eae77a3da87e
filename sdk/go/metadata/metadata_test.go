package metadata

import (
	"bytes"
	"reflect"
	"testing"
)

// A module importing flotilla:host/v1.log, a wasi function, a memory and a global, and exporting
// flotilla_score_v1 and flotilla_filter_v1 (as functions) plus a memory named like a point.
func module() []byte {
	imports := []byte{
		4,                                                                                  // count
		16, 'f', 'l', 'o', 't', 'i', 'l', 'l', 'a', ':', 'h', 'o', 's', 't', '/', 'v', '1', // module
		3, 'l', 'o', 'g', 0, 0, // func, type 0
		22, 'w', 'a', 's', 'i', '_', 's', 'n', 'a', 'p', 's', 'h', 'o', 't', '_', 'p', 'r', 'e', 'v', 'i', 'e', 'w', '1',
		9, 'p', 'r', 'o', 'c', '_', 'e', 'x', 'i', 't', 0, 0,
		3, 'e', 'n', 'v', 3, 'm', 'e', 'm', 2, 1, 1, 2, // memory, limits min 1 max 2
		3, 'e', 'n', 'v', 1, 'g', 3, 0x7f, 0, // global i32 const
	}
	exports := []byte{3}
	for _, e := range []struct {
		name string
		kind byte
	}{{"flotilla_score_v1", 0}, {"flotilla_filter_v1", 0}, {"flotilla_assign_v1", 2}} {
		exports = append(exports, byte(len(e.name)))
		exports = append(exports, e.name...)
		exports = append(exports, e.kind, 0)
	}
	m := []byte("\x00asm\x01\x00\x00\x00")
	m = append(m, 1, 4, 1, 0x60, 0, 0) // type section: one func type () -> ()
	m = append(m, 2, byte(len(imports)))
	m = append(m, imports...)
	m = append(m, 7, byte(len(exports)))
	return append(m, exports...)
}

func TestCapabilitiesFollowExportsAndImports(t *testing.T) {
	caps, err := Capabilities(module())
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"filter", "score", "log", "wasi"}; !reflect.DeepEqual(caps, want) {
		t.Fatalf("capabilities %q, want %q", caps, want)
	}
}

func TestAnnotateAppendsOrReplacesTheSection(t *testing.T) {
	orig := module()
	out, err := Annotate(orig, Metadata{Name: "p", Version: "1.2.3"})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(out, orig) {
		t.Fatal("the module's sections must be kept as they are")
	}
	m, err := Read(out)
	if err != nil || m == nil {
		t.Fatalf("read back: %v %v", m, err)
	}
	if want := (Metadata{ABI: 1, Name: "p", Version: "1.2.3", Capabilities: []string{"filter", "score", "log", "wasi"}}); !reflect.DeepEqual(*m, want) {
		t.Fatalf("metadata %+v", *m)
	}
	again, err := Annotate(out, Metadata{Name: "q", Version: "2", Capabilities: []string{"score"}})
	if err != nil {
		t.Fatal(err)
	}
	if m, _ := Read(again); m.Name != "q" || !reflect.DeepEqual(m.Capabilities, []string{"score"}) || bytes.Count(again, []byte(Section)) != 1 {
		t.Fatalf("replaced: %+v", m)
	}
	if m, err := Read(orig); m != nil || err != nil {
		t.Fatalf("no section: %v %v", m, err)
	}
}

func TestRejectsNonModules(t *testing.T) {
	if _, err := Annotate([]byte("not wasm"), Metadata{}); err == nil {
		t.Fatal("want an error")
	}
	if _, err := Capabilities(append(module(), 7, 50)); err == nil {
		t.Fatal("a truncated section must fail")
	}
}
