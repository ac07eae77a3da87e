// __NAME__: a Flotilla __POINT__ plugin in Go, on the vendored Go SDK (flotilla-sdk/, module
// flotilla.dev/sdk/go). Built as a wasip1 reactor: GOOS=wasip1 GOARCH=wasm go build
// -buildmode=c-shared (./build.sh). What it does and how to test and load it: README.md.
package main

import (
	"encoding/json"
	"fmt"

	flotilla "flotilla.dev/sdk/go"
__IMPORTS__)

// label is the cluster label this plugin looks at; the profile's config.label overrides it.
var label = "__LABEL__"

func init() {
	flotilla.OnInit(func(name string, raw json.RawMessage) error {
		var cfg struct {
			Label *string `json:"label"`
		}
		if len(raw) > 0 && string(raw) != "null" {
			if err := json.Unmarshal(raw, &cfg); err != nil {
				return fmt.Errorf("config: %w", err)
			}
		}
		if cfg.Label != nil {
			if *cfg.Label == "" {
				return fmt.Errorf("config: \"label\" must be a non-empty string")
			}
			label = *cfg.Label
		}
		return nil
	})
}

func labelled(c *flotilla.Cluster) bool {
	_, ok := c.Labels[label]
	return ok
}

// main is never called: the host calls the exported functions of the reactor.
func main() {}
