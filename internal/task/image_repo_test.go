package task

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/demo/demotest"
	"github.com/minisandbox/msb/internal/envcache"
	"github.com/minisandbox/msb/internal/rootfs"
	"github.com/minisandbox/msb/internal/session"
)

// TestImageRepoElsewhere runs an instance on an image that keeps its
// repository at its WORKDIR (/srv/calc, owned by its USER calc, uid 1000),
// not /testbed: the task sandbox's commands start there and run as calc
// (rootless too, through the caller's subordinate ids), the agent's patch is
// the diff there, and evaluation cds there and runs as root (as
// SWE-bench's harness applies patches), git trusting calc's repository,
// grading gold resolved and an empty patch not. An image
// whose WORKDIR holds no repository and that has no /testbed is
// ErrImageNoRepo naming both places.
func TestImageRepoElsewhere(t *testing.T) {
	f := newFixture(t)
	src := f.gen.Instances[0]
	root := demotest.ImageRootfs(t, f.gen.RepoDir, src.BaseCommit, f.gen.PyVersion)
	if err := os.MkdirAll(filepath.Join(root, "srv"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(root, "testbed"), filepath.Join(root, "srv", "calc")); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, root, map[string]string{
		"etc/passwd": "root:x:0:0:root:/root:/bin/bash\ncalc:x:1000:1001:calc:/srv/calc:/bin/bash\n",
		"etc/group":  "root:x:0:\ncalc:x:1001:\n",
	})
	owner := func(rel string) (int, int) {
		if strings.HasPrefix(rel, "srv/calc") {
			return 1000, 1001
		}
		return 0, 0
	}
	const name = "example.com/msb-test/calc-srv:1"
	importImage(t, f, name, withConfig(t, demotest.ImageOwned(t, root, owner), "/srv/calc", "calc"))
	inst := src
	inst.InstanceID, inst.Repo, inst.Image = "calc__srv-1", src.Repo+"-srv", name
	inst.RepoURL = "/nonexistent"
	sp := "  " + inst.Repo + ":\n    \"*\":\n      python: \"" + f.gen.PyVersion + "\"\n      eval_commands: [\"echo msb-eval-uid=$(id -u) msb-eval-dir=$(pwd) msb-eval-home=$HOME\"]\n      test_cmd: python -m unittest -v\n      log_parser: unittest\n      directives: none\n"
	tk, err := New(inst, f.overrides(t, sp))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	sb, err := Open(ctx, f.env, tk, Options{})
	if err != nil {
		t.Fatal(err)
	}
	const wantUID = "1000" // rootless too, through the caller's subordinate ids
	res, err := sb.Exec(ctx, session.ExecRequest{Command: "pwd; id -u; echo $HOME; git rev-parse HEAD; echo '# agent' >> calc/stats.py", Timeout: time.Minute})
	if err != nil || res.Output != "/srv/calc\n"+wantUID+"\n/srv/calc\n"+src.BaseCommit+"\n" {
		sb.Close()
		t.Fatalf("task sandbox: %v %q (want /srv/calc, uid %s, calc's HOME from /etc/passwd, the base commit)", err, res.Output, wantUID)
	}
	diff, err := sb.Diff(ctx)
	dir := sb.RepoDir()
	sb.Close()
	if err != nil || !strings.Contains(diff, "+# agent") || !strings.Contains(diff, "calc/stats.py") || dir != "/srv/calc" {
		t.Fatalf("agent's patch in %s: %v %q", dir, err, diff)
	}
	gold := inst.ReferenceFix()
	ev := Evaluate(ctx, f.env, tk, api.Prediction{InstanceID: inst.InstanceID, Model: "m", ModelPatch: &gold}, opts())
	if ev.Result.Outcome != api.OutcomeResolved || !strings.Contains(ev.Artifacts.TestOutput, "msb-eval-uid=0 msb-eval-dir=/srv/calc msb-eval-home=/root") ||
		!strings.Contains(ev.Artifacts.EvalScript, "\ncd /srv/calc\n") {
		t.Fatalf("gold: %s %s\n%s\n%s", ev.Result.Outcome, ev.Result.Detail, ev.Artifacts.EvalScript, ev.Artifacts.TestOutput)
	}
	o := opts()
	o.GradeEmpty = true
	if ev := Evaluate(ctx, f.env, tk, api.Prediction{InstanceID: inst.InstanceID, Model: "m", ModelPatch: ptr("")}, o); ev.Result.Outcome != api.OutcomeUnresolved {
		t.Fatalf("empty patch: %s %s\n%s", ev.Result.Outcome, ev.Result.Detail, ev.Artifacts.TestOutput)
	}

	// A WORKDIR without a repository, and no /testbed.
	inst.InstanceID, inst.Image = "calc__srv-2", "example.com/msb-test/calc-none:1"
	if err := os.Rename(filepath.Join(root, "srv", "calc", ".git"), filepath.Join(root, "srv", "calc.git")); err != nil {
		t.Fatal(err)
	}
	importImage(t, f, inst.Image, withConfig(t, demotest.Image(t, root), "/srv/calc", ""))
	if tk, err = New(inst, f.overrides(t, sp)); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, f.env, tk, Options{}); !errors.Is(err, envcache.ErrImageNoRepo) ||
		!strings.Contains(err.Error(), "/srv/calc, /testbed") || !strings.Contains(err.Error(), inst.Image) {
		t.Fatalf("an image without a repository: %v", err)
	}
}

// withConfig is img with its WorkingDir and User set.
func withConfig(t *testing.T, img v1.Image, workdir, user string) v1.Image {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	c.WorkingDir, c.User = workdir, user
	if img, err = mutate.Config(img, c); err != nil {
		t.Fatal(err)
	}
	return img
}

// importImage imports img into the fixture's cache under name.
func importImage(t *testing.T, f *fixture, name string, img v1.Image) {
	t.Helper()
	if _, err := rootfs.Import(t.Context(), f.env.Cache.Store(), img, rootfs.ImportOptions{Names: []string{name}}); err != nil {
		t.Fatal(err)
	}
}

// writeFiles writes files (path relative to root: content).
func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for rel, body := range files {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
