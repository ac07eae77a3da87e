// The CNCF distribution registry (github.com/distribution/distribution), built from its Go
// module for the OCI tests of WasmPlugin images and `flotilla plugin push|pull`: the registry's
// own command with only the filesystem and in-memory storage drivers linked (the cloud drivers
// would only lengthen the build). Run: `oci-registry serve CONFIG.yml`.
package main

import (
	"os"

	"github.com/distribution/distribution/v3/registry"
	_ "github.com/distribution/distribution/v3/registry/auth/htpasswd"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/filesystem"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/inmemory"
)

func main() {
	if err := registry.RootCmd.Execute(); err != nil {
		os.Exit(1)
	}
}
