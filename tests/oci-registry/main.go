// The CNCF distribution registry (github.com/distribution/distribution), built from its Go
// module for the OCI tests of WasmPlugin images and `flotilla plugin push|pull`: the registry's
// own command with only the filesystem and in-memory storage drivers linked (the cloud drivers
// would only lengthen the build). Run: `oci-registry serve CONFIG.yml`.
//
// `oci-registry htpasswd USER PASSWORD` prints an htpasswd line (bcrypt, the only scheme the
// registry's htpasswd auth accepts), so the tests need no Apache tools.
package main

import (
	"fmt"
	"os"

	"github.com/distribution/distribution/v3/registry"
	_ "github.com/distribution/distribution/v3/registry/auth/htpasswd"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/filesystem"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/inmemory"
	"golang.org/x/crypto/bcrypt"
)

func main() {
	if len(os.Args) == 4 && os.Args[1] == "htpasswd" {
		hash, err := bcrypt.GenerateFromPassword([]byte(os.Args[3]), bcrypt.DefaultCost)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Printf("%s:%s\n", os.Args[2], hash)
		return
	}
	if err := registry.RootCmd.Execute(); err != nil {
		os.Exit(1)
	}
}
