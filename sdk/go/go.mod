module flotilla.dev/sdk/go

go 1.24
