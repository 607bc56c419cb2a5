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

// TestReachesSandboxesThroughTheEngine: no file of the CLI (tests aside),
// in the full build or the lean one (-tags msblean, whose engine is its
// Host alone, package engine/host), imports the sandbox layer, its
// sessions, mounts or cgroups.
func TestReachesSandboxesThroughTheEngine(t *testing.T) {
	for _, build := range []struct{ tags, engine string }{
		{"", "github.com/minisandbox/msb/internal/engine"},
		{"msblean", "github.com/minisandbox/msb/internal/engine/host"},
	} {
		out, err := exec.Command("go", "list", "-tags", build.tags, "-f", `{{join .Imports "\n"}}`, ".").Output()
		if err != nil {
			t.Fatalf("go list -tags %q -f {{.Imports}} ./internal/cli: %v", build.tags, err)
		}
		imports := strings.Fields(string(out))
		if !slices.Contains(imports, build.engine) {
			t.Fatalf("go list -tags %q ./internal/cli lacks %s among its imports: %q", build.tags, build.engine, imports)
		}
		for _, p := range imports {
			for _, below := range belowEngine {
				if p == below || strings.HasPrefix(p, below+"/") {
					t.Errorf("internal/cli (tags %q) imports %s: reach it through internal/engine", build.tags, p)
				}
			}
		}
	}
}
