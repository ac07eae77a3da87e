// Package metadata writes the optional `flotilla.plugin` custom section (sdk/ABI.md §1) into a
// built module. Go's linker cannot emit custom sections, so a Go plugin gets its metadata after
// the build, with the flotilla-metadata command:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o plugin.wasm .
//	go run flotilla.dev/sdk/go/cmd/flotilla-metadata -name my-plugin -version 0.1.0 plugin.wasm
//
// It works on any core module (the section is appended; an existing one is replaced).
package metadata

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
)

// Section is the custom section's name.
const Section = "flotilla.plugin"

// Metadata is the section's JSON.
type Metadata struct {
	ABI          int      `json:"abi"`
	Name         string   `json:"name"`
	Version      string   `json:"version"`
	Capabilities []string `json:"capabilities"`
}

var points = []struct{ export, capability string }{
	{"flotilla_filter_v1", "filter"},
	{"flotilla_score_v1", "score"},
	{"flotilla_select_v1", "select"},
	{"flotilla_assign_v1", "assign"},
	{"flotilla_override_v1", "override"},
	{"flotilla_interpret_v1", "interpret"},
}

type section struct {
	id   byte
	body []byte // without id and size
}

func uleb(b []byte, pos *int) (uint32, error) {
	var v uint32
	for shift := 0; shift < 35; shift += 7 {
		if *pos >= len(b) {
			return 0, errors.New("truncated LEB128")
		}
		c := b[*pos]
		*pos++
		v |= uint32(c&0x7f) << shift
		if c&0x80 == 0 {
			return v, nil
		}
	}
	return 0, errors.New("LEB128 too long")
}

func name(b []byte, pos *int) (string, error) {
	n, err := uleb(b, pos)
	if err != nil {
		return "", err
	}
	if *pos+int(n) > len(b) {
		return "", errors.New("truncated name")
	}
	s := string(b[*pos : *pos+int(n)])
	*pos += int(n)
	return s, nil
}

func sections(wasm []byte) ([]section, error) {
	if len(wasm) < 8 || !bytes.Equal(wasm[:4], []byte("\x00asm")) || binary.LittleEndian.Uint32(wasm[4:]) != 1 {
		return nil, errors.New("not a core WebAssembly module (version 1)")
	}
	var out []section
	for pos := 8; pos < len(wasm); {
		id := wasm[pos]
		pos++
		n, err := uleb(wasm, &pos)
		if err != nil {
			return nil, err
		}
		if pos+int(n) > len(wasm) {
			return nil, fmt.Errorf("section %d is truncated", id)
		}
		out = append(out, section{id, wasm[pos : pos+int(n)]})
		pos += int(n)
	}
	return out, nil
}

// Capabilities derives a module's capabilities: the extension points it exports, then "log"
// and "wasi" when it imports flotilla:host/v1.log or anything from wasi_snapshot_preview1.
func Capabilities(wasm []byte) ([]string, error) {
	secs, err := sections(wasm)
	if err != nil {
		return nil, err
	}
	exports := map[string]bool{}
	var log, wasi bool
	for _, s := range secs {
		b, pos := s.body, 0
		switch s.id {
		case 2: // imports
			n, err := uleb(b, &pos)
			if err != nil {
				return nil, err
			}
			for range n {
				mod, err := name(b, &pos)
				if err != nil {
					return nil, err
				}
				field, err := name(b, &pos)
				if err != nil {
					return nil, err
				}
				log = log || mod == "flotilla:host/v1" && field == "log"
				wasi = wasi || mod == "wasi_snapshot_preview1"
				if err := skipImportDesc(b, &pos); err != nil {
					return nil, err
				}
			}
		case 7: // exports
			n, err := uleb(b, &pos)
			if err != nil {
				return nil, err
			}
			for range n {
				field, err := name(b, &pos)
				if err != nil {
					return nil, err
				}
				if pos >= len(b) {
					return nil, errors.New("truncated export")
				}
				kind := b[pos]
				pos++
				if _, err := uleb(b, &pos); err != nil {
					return nil, err
				}
				exports[field] = exports[field] || kind == 0
			}
		}
	}
	caps := []string{}
	for _, p := range points {
		if exports[p.export] {
			caps = append(caps, p.capability)
		}
	}
	if log {
		caps = append(caps, "log")
	}
	if wasi {
		caps = append(caps, "wasi")
	}
	return caps, nil
}

func skipImportDesc(b []byte, pos *int) error {
	if *pos >= len(b) {
		return errors.New("truncated import")
	}
	kind := b[*pos]
	*pos++
	limits := func() error {
		if *pos >= len(b) {
			return errors.New("truncated limits")
		}
		flags := b[*pos]
		*pos++
		if _, err := uleb(b, pos); err != nil {
			return err
		}
		if flags&1 != 0 {
			_, err := uleb(b, pos)
			return err
		}
		return nil
	}
	switch kind {
	case 0: // func: type index
		_, err := uleb(b, pos)
		return err
	case 1: // table: reftype, limits
		*pos++
		return limits()
	case 2: // memory
		return limits()
	case 3: // global: valtype, mutability
		*pos += 2
		return nil
	case 4: // tag: attribute, type index
		*pos++
		_, err := uleb(b, pos)
		return err
	}
	return fmt.Errorf("unknown import kind %d", kind)
}

func appendULEB(b []byte, v uint32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v != 0 {
			b = append(b, c|0x80)
		} else {
			return append(b, c)
		}
	}
}

// Annotate returns wasm with m as its flotilla.plugin section (ABI 1; nil capabilities are
// derived with Capabilities). Any previous flotilla.plugin section is dropped.
func Annotate(wasm []byte, m Metadata) ([]byte, error) {
	secs, err := sections(wasm)
	if err != nil {
		return nil, err
	}
	if m.ABI == 0 {
		m.ABI = 1
	}
	if m.Capabilities == nil {
		if m.Capabilities, err = Capabilities(wasm); err != nil {
			return nil, err
		}
	}
	payload, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	out := append([]byte(nil), wasm[:8]...)
	for _, s := range secs {
		if s.id == 0 {
			pos := 0
			if n, err := name(s.body, &pos); err == nil && n == Section {
				continue
			}
		}
		out = append(out, s.id)
		out = appendULEB(out, uint32(len(s.body)))
		out = append(out, s.body...)
	}
	body := appendULEB(nil, uint32(len(Section)))
	body = append(body, Section...)
	body = append(body, payload...)
	out = append(out, 0)
	out = appendULEB(out, uint32(len(body)))
	return append(out, body...), nil
}

// Read returns the module's flotilla.plugin metadata, or nil when it has none.
func Read(wasm []byte) (*Metadata, error) {
	secs, err := sections(wasm)
	if err != nil {
		return nil, err
	}
	for _, s := range secs {
		pos := 0
		if s.id != 0 {
			continue
		}
		if n, err := name(s.body, &pos); err != nil || n != Section {
			continue
		}
		var m Metadata
		if err := json.Unmarshal(s.body[pos:], &m); err != nil {
			return nil, fmt.Errorf("%s section: %w", Section, err)
		}
		return &m, nil
	}
	return nil, nil
}
