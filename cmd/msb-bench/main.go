//go:build !msblean

// Command msb-bench is MiniSandbox's benchmark, `msb bench` (docs/bench.md):
// the harness, its baselines and its plotting, kept out of the msb binary.
// msb bench runs it; it takes msb's global flags and settings. It drives
// the engine, so it has no lean build (-tags msblean skips it).
package main

import (
	"os"

	benchcli "github.com/minisandbox/msb/internal/bench/cli"
	"github.com/minisandbox/msb/internal/cli"
	"github.com/minisandbox/msb/internal/sandbox/sbinit"
)

func main() {
	if sbinit.IsChild() {
		sbinit.Main() // re-executed as a sandbox's init or supervisor (no msb-sandbox beside it)
	}
	os.Exit(cli.BenchMain(os.Args[1:], benchcli.New))
}
