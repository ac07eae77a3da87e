//go:build wasm

package score

import flotilla "flotilla.dev/sdk/go"

//go:wasmexport flotilla_score_v1
func scoreV1(jp, jn, rp, rn uint32) int32 {
	return call(flotilla.Bytes(jp, jn), flotilla.Bytes(rp, 4*rn))
}
