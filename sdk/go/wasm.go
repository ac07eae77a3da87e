//go:build wasm

package flotilla

import "unsafe"

//go:wasmimport flotilla:host/v1 log
func wasmLog(level int32, ptr uint32, n uint32)

//go:wasmimport flotilla:host/v1 set_result
func wasmSetResult(ptr uint32, n uint32)

//go:wasmimport flotilla:host/v1 set_rows
func wasmSetRows(ptr uint32, n uint32)

func hostLog(level int32, b []byte) { wasmLog(level, ptr(b), uint32(len(b))) }
func hostSetResult(b []byte)        { wasmSetResult(ptr(b), uint32(len(b))) }
func hostSetRows(b []byte)          { wasmSetRows(ptr(b), uint32(len(b))) }

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

//go:wasmexport flotilla_init_v1
func initV1(p, n uint32) int32 { return Init(Bytes(p, n)) }

//go:wasmexport flotilla_clusters_v1
func clustersV1(p, n uint32) int32 { return PushClusters(Bytes(p, n)) }

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
