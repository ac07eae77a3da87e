//go:build wasm

package override

import flotilla "flotilla.dev/sdk/go"

//go:wasmexport flotilla_override_v1
func overrideV1(jp, jn, rp, rn uint32) int32 {
	return call(flotilla.Bytes(jp, jn))
}
