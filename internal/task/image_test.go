package task

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/demo/demotest"
	"github.com/minisandbox/msb/internal/envcache"
	"github.com/minisandbox/msb/internal/rootfs"
)

// TestImageInstance runs an instance whose row names an image: the task's
// root is the image (no host directories, no environment built), its
// repository the image's /testbed, the image's Env applies, the agent's
// patch is git diff there, and evaluation in a fresh sandbox on the same
// image grades the gold patch resolved and an empty one not. An image the
// cache lacks is ErrNoImage naming it and the import command; one without
// a repository at /testbed is ErrImageNoRepo. Copy mode runs it too.
func TestImageInstance(t *testing.T) {
	f := newFixture(t)
	src := f.gen.Instances[0]
	const name = "example.com/msb-test/calc:1"
	img := demotest.Image(t, demotest.ImageRootfs(t, f.gen.RepoDir, src.BaseCommit, f.gen.PyVersion), "MSB_IMAGE_MARK=from-the-image")
	if _, err := rootfs.Import(t.Context(), f.env.Cache.Store(), img, rootfs.ImportOptions{Names: []string{name}}); err != nil {
		t.Fatal(err)
	}
	inst := src
	inst.InstanceID, inst.Repo, inst.Image = "calc__image-1", src.Repo+"-image", name
	inst.RepoURL = "/nonexistent" // the image's repository is used, never cloned
	sp := "  " + inst.Repo + ":\n    \"*\":\n      python: \"" + f.gen.PyVersion + "\"\n      pip_packages: [nothing-to-install]\n      install: \"exit 1\"\n      test_cmd: python -m unittest -v\n      log_parser: unittest\n      directives: none\n"
	tk, err := New(inst, f.overrides(t, sp))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	sb, err := Open(ctx, f.env, tk, Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := sb.run(ctx, "echo $MSB_IMAGE_MARK; test -e /usr/bin/gcc && echo host-leak; git rev-parse HEAD; echo '# agent' >> calc/stats.py", time.Minute)
	if err != nil || res.Output != "from-the-image\n"+src.BaseCommit+"\n" {
		sb.Close()
		t.Fatalf("task sandbox on the image: %v %q", err, res.Output)
	}
	diff, err := sb.Diff(ctx)
	sb.Close()
	if err != nil || !strings.Contains(diff, "+# agent") || !strings.Contains(diff, "calc/stats.py") {
		t.Fatalf("agent's patch: %v %q", err, diff)
	}
	// Copy mode (hosts without overlayfs): the image's files in a private tree.
	copied, err := envcache.Open(envcache.Options{Dir: f.env.Cache.Dir(), Runtime: f.env.Runtime, CopyMode: true})
	if err != nil {
		t.Fatal(err)
	}
	csb, err := Open(ctx, Env{Runtime: f.env.Runtime, Cache: copied}, tk, Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, err = csb.run(ctx, "echo $MSB_IMAGE_MARK; git status --short; git rev-parse HEAD", time.Minute)
	csb.Close()
	if err != nil || res.Output != "from-the-image\n"+src.BaseCommit+"\n" {
		t.Fatalf("copy mode on the image: %v %q", err, res.Output)
	}
	gold := inst.ReferenceFix()
	if ev := Evaluate(ctx, f.env, tk, api.Prediction{InstanceID: inst.InstanceID, Model: "m", ModelPatch: &gold}, opts()); ev.Result.Outcome != api.OutcomeResolved {
		t.Fatalf("gold on the image: %s %s\n%s", ev.Result.Outcome, ev.Result.Detail, ev.Artifacts.TestOutput)
	}
	o := opts()
	o.GradeEmpty = true
	if ev := Evaluate(ctx, f.env, tk, api.Prediction{InstanceID: inst.InstanceID, Model: "m", ModelPatch: ptr("")}, o); ev.Result.Outcome != api.OutcomeUnresolved {
		t.Fatalf("empty patch on the image: %s %s\n%s", ev.Result.Outcome, ev.Result.Detail, ev.Artifacts.TestOutput)
	}

	inst.InstanceID, inst.Image = "calc__image-2", "example.com/msb-test/absent:1"
	tk, err = New(inst, f.overrides(t, sp))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, f.env, tk, Options{}); !errors.Is(err, envcache.ErrNoImage) ||
		!strings.Contains(err.Error(), "msb cache import-image --name "+inst.Image) {
		t.Fatalf("an image the cache lacks: %v", err)
	}
	inst.InstanceID, inst.Image = "calc__image-3", "example.com/msb-test/norepo:1"
	norepo := t.TempDir()
	if err := os.WriteFile(filepath.Join(norepo, "README"), []byte("no /testbed here\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := rootfs.Import(t.Context(), f.env.Cache.Store(), demotest.Image(t, norepo), rootfs.ImportOptions{Names: []string{inst.Image}}); err != nil {
		t.Fatal(err)
	}
	if tk, err = New(inst, f.overrides(t, sp)); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, f.env, tk, Options{}); !errors.Is(err, envcache.ErrImageNoRepo) || !strings.Contains(err.Error(), inst.Image) {
		t.Fatalf("an image without /testbed: %v", err)
	}
}
