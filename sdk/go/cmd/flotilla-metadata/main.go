// Command flotilla-metadata writes the optional flotilla.plugin custom section (sdk/ABI.md §1)
// into a built plugin module, in place. Go's linker cannot emit custom sections; run this after
// `GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared`:
//
//	go run flotilla.dev/sdk/go/cmd/flotilla-metadata -name my-plugin -version 0.1.0 plugin.wasm
//
// Capabilities default to what the module exports and imports (extension points, log, wasi);
// -capabilities score,log sets them explicitly.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"flotilla.dev/sdk/go/metadata"
)

func main() {
	name := flag.String("name", "", "plugin name (required)")
	version := flag.String("version", "", "plugin version, e.g. 0.1.0 (required)")
	caps := flag.String("capabilities", "", "comma-separated capabilities (default: derived from the module)")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: flotilla-metadata -name NAME -version VERSION [-capabilities a,b] MODULE.wasm")
		flag.PrintDefaults()
	}
	flag.Parse()
	if *name == "" || *version == "" || flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	path := flag.Arg(0)
	wasm, err := os.ReadFile(path)
	if err == nil {
		m := metadata.Metadata{ABI: 1, Name: *name, Version: *version}
		if *caps != "" {
			m.Capabilities = strings.Split(*caps, ",")
		}
		if wasm, err = metadata.Annotate(wasm, m); err == nil {
			err = os.WriteFile(path, wasm, 0o644)
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "flotilla-metadata: %s: %v\n", path, err)
		os.Exit(1)
	}
}
