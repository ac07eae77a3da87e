//go:build wasm

package filter

import flotilla "flotilla.dev/sdk/go"

//go:wasmexport flotilla_filter_v1
func filterV1(jp, jn, rp, rn uint32) int32 {
	return call(flotilla.Bytes(jp, jn), flotilla.Bytes(rp, 4*rn))
}
