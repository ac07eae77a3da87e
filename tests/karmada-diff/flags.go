package main

import "flag"

func flagLookup(name string) *flag.Flag { return flag.CommandLine.Lookup(name) }
