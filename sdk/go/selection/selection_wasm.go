//go:build wasm

package selection

import flotilla "flotilla.dev/sdk/go"

//go:wasmexport flotilla_select_v1
func selectV1(jp, jn, rp, rn uint32) int32 {
	return call(flotilla.Bytes(jp, jn), flotilla.Bytes(rp, 32*rn))
}
