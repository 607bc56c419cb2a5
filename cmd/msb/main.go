// Command msb is MiniSandbox: container-free sandboxes for software-engineering agents.
package main

import (
	"os"

	"github.com/minisandbox/msb/internal/cli"
	"github.com/minisandbox/msb/internal/sandbox/sbinit"
)

func main() {
	if sbinit.IsChild() {
		sbinit.Main() // re-executed as a sandbox's init or supervisor
	}
	os.Exit(cli.Main(os.Args[1:]))
}
