module flotilla.dev/examples/go-shard-interpreter

go 1.24

require flotilla.dev/sdk/go v0.0.0

replace flotilla.dev/sdk/go => ../../../sdk/go
