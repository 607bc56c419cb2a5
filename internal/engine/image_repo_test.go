package engine

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/demo/demotest"
	"github.com/minisandbox/msb/internal/rootfs"
)

// TestImageRepoSandbox drives, as the native API and the gym do, an
// instance whose image keeps its repository at its WORKDIR (/srv/calc,
// owned by its USER calc) instead of /testbed: the sandbox reports that
// directory (the gym's cwd, SWE-ReX's relative paths), a session starts
// there as calc (rootless too) with calc's HOME from the image's
// /etc/passwd (its Env has none), a fork keeps both, and the agent's
// edit there is evaluated resolved; a plain sandbox on the image starts
// there as calc too. An image with no repository where msb looks is a bad
// request.
func TestImageRepoSandbox(t *testing.T) {
	g := generated(t)
	e := openEngine(t, "  demo/calc-srv:\n    \"*\":\n      test_cmd: python -m unittest -v\n      log_parser: unittest\n      directives: none\n", nil)
	ctx := context.Background()
	src := g.Instances[0]
	root := demotest.ImageRootfs(t, g.RepoDir, src.BaseCommit, g.PyVersion)
	if err := os.MkdirAll(filepath.Join(root, "srv"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(root, "testbed"), filepath.Join(root, "srv", "calc")); err != nil {
		t.Fatal(err)
	}
	const ref = "example.com/msb-test/engine-calc-srv:1"
	importCalcImage(t, e, root, "/srv/calc", ref)
	inst := src
	inst.InstanceID, inst.Repo, inst.Image, inst.RepoURL = "calc__engine-srv-1", "demo/calc-srv", ref, ""
	if err := e.Add(inst); err != nil {
		t.Fatal(err)
	}
	agent, err := e.CreateSandbox(ctx, SandboxRequest{InstanceID: inst.InstanceID})
	if err != nil {
		t.Fatal(err)
	}
	defer agent.Close()
	if agent.RepoDir() != "/srv/calc" {
		t.Fatalf("repository dir %q, want /srv/calc", agent.RepoDir())
	}
	const uid = "1000" // rootless too, through the caller's subordinate ids
	if err := agent.OpenSession(ctx, api.SessionRequest{Name: "main"}); err != nil {
		t.Fatal(err)
	}
	res, err := agent.Exec(ctx, api.ExecRequest{Session: "main", Command: `pwd; id -u; echo "$HOME"; sed -i 's|^    return s\[mid\]$|    return (s[mid - 1] + s[mid]) / 2|' calc/stats.py`, TimeoutNs: int64(time.Minute)})
	if err != nil || res.ExitCode != 0 || res.Stdout != "/srv/calc\n"+uid+"\n/srv/calc\n" {
		t.Fatalf("session on the image: %v %+v", err, res)
	}
	kids, err := e.Fork(ctx, agent.ID(), api.ForkRequest{})
	if err != nil {
		t.Fatal(err)
	}
	kid := kids[0]
	defer kid.Close()
	res, err = kid.Exec(ctx, api.ExecRequest{Command: "pwd; id -u; git diff --stat | tail -1", TimeoutNs: int64(time.Minute)})
	if err != nil || kid.RepoDir() != "/srv/calc" || res.Stdout != "/srv/calc\n"+uid+"\n 1 file changed, 1 insertion(+), 1 deletion(-)\n" {
		t.Fatalf("fork of the task sandbox: %v %q %+v", err, kid.RepoDir(), res)
	}
	result, art, err := kid.Evaluate(ctx, "agent")
	if err != nil || result.Outcome != api.OutcomeResolved || !strings.Contains(art.Patch, "b/calc/stats.py") {
		t.Fatalf("the agent's patch: %v %s %s\n%s", err, result.Outcome, result.Detail, art.Patch)
	}

	// A plain sandbox on the image: its WORKDIR and USER too.
	raw, err := e.CreateSandbox(ctx, SandboxRequest{Image: ref})
	if err != nil {
		t.Fatal(err)
	}
	res, err = raw.Exec(ctx, api.ExecRequest{Command: "pwd; id -u; id -g", TimeoutNs: int64(time.Minute)})
	raw.Close()
	if err != nil || res.Stdout != "/srv/calc\n"+uid+"\n"+uid+"\n" { // calc's group is 1000 too
		t.Fatalf("plain sandbox on the image: %v %+v", err, res)
	}

	// An image without a repository where msb looks: a bad request (400,
	// exit 2), in one line naming the image and the places.
	if err := os.RemoveAll(filepath.Join(root, "srv", "calc", ".git")); err != nil {
		t.Fatal(err)
	}
	const norepo = "example.com/msb-test/engine-calc-norepo:1"
	importImage(t, e, norepo, demotest.Image(t, root))
	inst.InstanceID, inst.Image = "calc__engine-srv-2", norepo
	if err := e.Add(inst); err != nil {
		t.Fatal(err)
	}
	_, err = e.CreateSandbox(ctx, SandboxRequest{InstanceID: inst.InstanceID})
	if Kind(err) != api.CodeBadRequest || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), norepo) ||
		!strings.Contains(err.Error(), "(looked in /testbed)") {
		t.Fatalf("an image without a repository: %s: %v", Kind(err), err)
	}
}

// importImage imports img into the engine's cache under ref.
func importImage(t *testing.T, e *Engine, ref string, img v1.Image) {
	t.Helper()
	if _, err := rootfs.Import(context.Background(), e.cache.c.Store(), img, rootfs.ImportOptions{Names: []string{ref}}); err != nil {
		t.Fatal(err)
	}
}
