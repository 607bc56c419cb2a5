package server

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/demo"
	"github.com/minisandbox/msb/internal/demo/demotest"
	"github.com/minisandbox/msb/internal/engine"
	"github.com/minisandbox/msb/internal/spec"
)

// TestGymImageRepo: the gym's reset on an instance whose image keeps its
// repository at its WORKDIR (/srv/calc) reports that directory as the
// episode's cwd, where its steps run.
func TestGymImageRepo(t *testing.T) {
	g := generated(t)
	ov, err := spec.ParseOverrides([]byte(demo.SpecYAML(g.PyVersion) + "  demo/calc-srv:\n    \"*\":\n      test_cmd: python -m unittest -v\n      log_parser: unittest\n      directives: none\n"))
	if err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, func(c *engine.Config) { c.Overrides = ov }, nil)
	ctx := context.Background()
	src := g.Instances[0]
	root := demotest.ImageRootfs(t, g.RepoDir, src.BaseCommit, g.PyVersion)
	if err := os.MkdirAll(filepath.Join(root, "srv"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(root, "testbed"), filepath.Join(root, "srv", "calc")); err != nil {
		t.Fatal(err)
	}
	img := demotest.Image(t, root)
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	conf := cf.Config
	conf.WorkingDir = "/srv/calc"
	if img, err = mutate.Config(img, conf); err != nil {
		t.Fatal(err)
	}
	const ref = "example.com/msb-test/gym-calc-srv:1"
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(t.TempDir(), "calc.tar")
	if err := tarball.WriteToFile(archive, tag, img); err != nil {
		t.Fatal(err)
	}
	if _, err := d.e.Cache().ImportImage(ctx, "docker-archive:"+archive, engine.ImageOptions{}); err != nil {
		t.Fatal(err)
	}
	inst := src
	inst.InstanceID, inst.Repo, inst.Image, inst.RepoURL = "calc__gym-srv-1", "demo/calc-srv", ref, ""
	if err := d.e.Add(inst); err != nil {
		t.Fatal(err)
	}
	var obs api.GymObservation
	if err := d.unix.Call(ctx, "POST", "/v1/gym/reset", api.GymResetRequest{InstanceID: inst.InstanceID}, &obs); err != nil || obs.Cwd != "/srv/calc" {
		t.Fatalf("reset: %v %+v", err, obs)
	}
	defer d.unix.DeleteSandbox(ctx, obs.SandboxID)
	var step api.GymStep
	if err := d.unix.Call(ctx, "POST", "/v1/gym/"+obs.SandboxID+"/step", api.GymStepRequest{Command: "pwd; git rev-parse HEAD"}, &step); err != nil ||
		!strings.HasPrefix(step.Observation.Stdout, "/srv/calc\n"+src.BaseCommit) {
		t.Fatalf("step: %v %+v", err, step)
	}
}
