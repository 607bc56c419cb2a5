package engine

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/demo/demotest"
	"github.com/minisandbox/msb/internal/rootfs"
)

// TestImageInstanceSandbox drives an instance whose row names an image as
// the native API and the gym environment do: its task sandbox is the
// image's (its Env, its /testbed), the agent's patch made in a session is
// evaluated in a fresh sandbox on the same image, and a patch that fixes
// nothing is not resolved.
func TestImageInstanceSandbox(t *testing.T) {
	g := generated(t)
	e := openEngine(t, "  demo/calc-img:\n    \"*\":\n      test_cmd: python -m unittest -v\n      log_parser: unittest\n      directives: none\n", nil)
	ctx := context.Background()
	src := g.Instances[0]
	const ref = "example.com/msb-test/engine-calc:1"
	img := demotest.Image(t, demotest.ImageRootfs(t, g.RepoDir, src.BaseCommit, g.PyVersion), "MSB_IMAGE_MARK=engine")
	if _, err := rootfs.Import(ctx, e.cache.c.Store(), img, rootfs.ImportOptions{Names: []string{ref}}); err != nil {
		t.Fatal(err)
	}
	inst := src
	inst.InstanceID, inst.Repo, inst.Image, inst.RepoURL = "calc__engine-img-1", "demo/calc-img", ref, ""
	if err := e.Add(inst); err != nil {
		t.Fatal(err)
	}
	agent, err := e.CreateSandbox(ctx, SandboxRequest{InstanceID: inst.InstanceID})
	if err != nil {
		t.Fatal(err)
	}
	defer agent.Close()
	if err := agent.OpenSession(ctx, api.SessionRequest{Name: "main"}); err != nil {
		t.Fatal(err)
	}
	res, err := agent.Exec(ctx, api.ExecRequest{Session: "main", Command: `pwd; echo $MSB_IMAGE_MARK; sed -i 's|^    return s\[mid\]$|    return (s[mid - 1] + s[mid]) / 2|' calc/stats.py`, TimeoutNs: int64(time.Minute)})
	if err != nil || res.ExitCode != 0 || res.Stdout != "/testbed\nengine\n" {
		t.Fatalf("exec on the image: %v %+v", err, res)
	}
	result, art, err := agent.Evaluate(ctx, "agent")
	if err != nil || result.Outcome != api.OutcomeResolved || !strings.Contains(art.Patch, "b/calc/stats.py") {
		t.Fatalf("the agent's patch on the image: %v %s %s\n%s", err, result.Outcome, result.Detail, art.Patch)
	}
	notes := "diff --git a/NOTES.txt b/NOTES.txt\nnew file mode 100644\n--- /dev/null\n+++ b/NOTES.txt\n@@ -0,0 +1 @@\n+nothing fixed\n"
	if result, _, err := e.Evaluate(ctx, inst.InstanceID, "m", &notes); err != nil || result.Outcome != api.OutcomeUnresolved {
		t.Fatalf("a patch that fixes nothing, on the image: %v %s %s", err, result.Outcome, result.Detail)
	}
}
