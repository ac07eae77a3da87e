//go:build wasm

package interpret

import flotilla "flotilla.dev/sdk/go"

//go:wasmexport flotilla_interpret_v1
func interpretV1(jp, jn, rp, rn uint32) int32 {
	return call(flotilla.Bytes(jp, jn))
}
