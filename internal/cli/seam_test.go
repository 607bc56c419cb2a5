package cli

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// belowEngine are the packages under the engine that a front end must not
// reach past it to (docs/architecture.md): the CLI talks to the engine, in
// process or through the daemon's client.
var belowEngine = []string{
	"github.com/minisandbox/msb/internal/sandbox",
	"github.com/minisandbox/msb/internal/session",
	"github.com/minisandbox/msb/internal/mount",
	"github.com/minisandbox/msb/internal/cgroup",
}

// TestReachesSandboxesThroughTheEngine: no file of the CLI (tests aside)
// imports the sandbox layer, its sessions, mounts or cgroups.
func TestReachesSandboxesThroughTheEngine(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`, ".").Output()
	if err != nil {
		t.Fatalf("go list -f {{.Imports}} ./internal/cli: %v", err)
	}
	imports := strings.Fields(string(out))
	if !slices.Contains(imports, "github.com/minisandbox/msb/internal/engine") {
		t.Fatalf("go list ./internal/cli lacks internal/engine among its imports: %q", imports)
	}
	for _, p := range imports {
		for _, below := range belowEngine {
			if p == below || strings.HasPrefix(p, below+"/") {
				t.Errorf("internal/cli imports %s: reach it through internal/engine", p)
			}
		}
	}
}
