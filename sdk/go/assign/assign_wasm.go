//go:build wasm

package assign

import flotilla "flotilla.dev/sdk/go"

//go:wasmexport flotilla_assign_v1
func assignV1(jp, jn, rp, rn uint32) int32 {
	return call(flotilla.Bytes(jp, jn), flotilla.Bytes(rp, 32*rn))
}
