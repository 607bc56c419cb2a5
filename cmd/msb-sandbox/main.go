// Command msb-sandbox is the inside of a sandbox: its init and supervisor
// (package sbinit), as a binary of its own. msb starts it when it sits next
// to msb, because a small binary starts in a fraction of the time the whole
// CLI takes (its dataset and cache dependencies are large) and a sandbox
// starts it twice. Without it, msb re-executes itself in the same roles.
package main

import (
	"fmt"
	"os"

	"github.com/minisandbox/msb/internal/sandbox/sbinit"
)

func main() {
	if !sbinit.IsChild() {
		fmt.Fprintln(os.Stderr, "msb-sandbox is started by msb, not by hand; see msb run --help")
		os.Exit(2)
	}
	sbinit.Main()
}
