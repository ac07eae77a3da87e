//go:build !wasm

package flotilla

// Off wasm (`go test` on the host) the host imports are stand-ins that record what a call
// passed, so handlers and the SDK's decoding and encoding can be unit-tested natively.

var recorded struct {
	result, rows []byte
	logs         []string
}

func hostLog(level int32, b []byte) {
	recorded.logs = append(recorded.logs, string(b))
}
func hostSetResult(b []byte) { recorded.result = append([]byte(nil), b...) }
func hostSetRows(b []byte)   { recorded.rows = append([]byte(nil), b...) }

// Recorded returns what the last calls passed to set_result and set_rows and the log lines since
// the last Reset (native builds only, for unit tests).
func Recorded() (result, rows []byte, logs []string) {
	return recorded.result, recorded.rows, recorded.logs
}

// Reset clears what Recorded returns (native builds only).
func Reset() {
	recorded.result, recorded.rows, recorded.logs = nil, nil, nil
}
