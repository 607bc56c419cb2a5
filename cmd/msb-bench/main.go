//go:build !msblean

// Command msb-bench is MiniSandbox's benchmark, `msb bench` (docs/bench.md):
// the harness, its baselines and its plotting, kept out of the msb binary.
// msb bench runs it; it takes msb's global flags and settings. It drives
// the engine, so it has no lean build (-tags msblean skips it).
package main

import (
	"fmt"
	"os"

	"github.com/minisandbox/msb/internal/bench"
	benchcli "github.com/minisandbox/msb/internal/bench/cli"
	"github.com/minisandbox/msb/internal/cli"
	"github.com/minisandbox/msb/internal/sandbox/sbinit"
)

func main() {
	if sbinit.IsChild() {
		sbinit.Main() // re-executed as a sandbox's init or supervisor (no msb-sandbox beside it)
	}
	// Under `chrt -f` it goes on under SCHED_RR (re-executed): Go's
	// runtime can livelock when all its threads are SCHED_FIFO.
	if err := bench.RoundRobin(); err != nil {
		fmt.Fprintln(os.Stderr, "msb-bench:", err)
		os.Exit(1)
	}
	os.Exit(cli.BenchMain(os.Args[1:], benchcli.New))
}
