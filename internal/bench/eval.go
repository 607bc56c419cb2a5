package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/dataset"
	"github.com/minisandbox/msb/internal/demo"
	"github.com/minisandbox/msb/internal/engine"
	"github.com/minisandbox/msb/internal/envcache"
	"github.com/minisandbox/msb/internal/grading"
	"github.com/minisandbox/msb/internal/spec"
	"github.com/minisandbox/msb/internal/store"
	"github.com/minisandbox/msb/internal/task"
)

// EvalOptions size the evaluation benchmark.
type EvalOptions struct {
	Rounds int // evaluations of each demo instance
	// Podman measures the same evaluation in `podman run --rm` of
	// PodmanImage (a local image) with PodmanFlags (global podman flags).
	Podman      bool
	PodmanImage string
	PodmanFlags []string
	// Dir is the scratch directory (default a temp dir under TmpDir, removed after).
	Dir, TmpDir string
}

// Eval measures the per-instance overhead of an evaluation outside the test
// run itself (cached layers looked up, sandbox created, patch applied, log
// parsed and graded, sandbox closed) on the generated demo instances, with
// a warm cache, through the engine as msb eval runs it. cfg is the engine's
// config; its cache and overrides are the benchmark's own.
func Eval(ctx context.Context, cfg engine.Config, o EvalOptions) []Row {
	fail := func(err error) []Row { return []Row{{Name: "eval", Failed: err.Error()}} }
	dir := o.Dir
	if dir == "" {
		d, err := os.MkdirTemp(o.TmpDir, "msb-bench-eval-")
		if err != nil {
			return fail(err)
		}
		defer os.RemoveAll(d)
		dir = d
	}
	gen, err := demo.Generate(ctx, dir)
	if err != nil {
		return fail(err)
	}
	if cfg.Overrides, err = spec.ParseOverrides([]byte(demo.SpecYAML(gen.PyVersion))); err != nil {
		return fail(err)
	}
	cfg.Cache = engine.CacheConfig{Dir: filepath.Join(dir, "cache")}
	e, err := engine.Open(ctx, cfg)
	if err != nil {
		return fail(err)
	}
	defer e.Close()
	if err := e.Add(gen.Instances...); err != nil {
		return fail(err)
	}
	var overhead, tests, total []time.Duration
	for round := -1; round < o.Rounds; round++ {
		for _, in := range gen.Instances {
			p := in.Patch
			start := time.Now()
			res, _, err := e.Evaluate(ctx, in.InstanceID, "gold", &p)
			el := time.Since(start)
			if err != nil {
				return fail(err)
			}
			if res.Outcome != api.OutcomeResolved {
				return fail(fmt.Errorf("%s: %s %s", in.InstanceID, res.Outcome, res.Detail))
			}
			if round < 0 {
				continue // the first round builds the environment
			}
			total = append(total, el)
			tests = append(tests, time.Duration(res.Timings.Tests))
			overhead = append(overhead, el-time.Duration(res.Timings.Tests))
		}
	}
	ov50 := Summarize(overhead)
	rows := []Row{
		{Name: "msb eval: per-instance overhead outside the tests", Stats: ov50, Note: "layers lookup + sandbox + patch + parse/grade + close"},
		{Name: "msb eval: the test run itself", Stats: Summarize(tests)},
		{Name: "msb eval: whole evaluation", Stats: Summarize(total)},
	}
	if o.Podman {
		r := podmanRow(len(overhead), ov50, o)
		r.Name = "podman run --rm (container floor, no work)"
		rows = append(rows, r)
		rows = append(rows, podmanEvalRow(ctx, cfg, gen, dir, o, Summarize(total)))
	}
	return rows
}

// podmanEvalRow does the same evaluation work in `podman run --rm`: the
// host's /usr, the cached venv and the repository (as a podman overlay
// volume, so writes are discarded) mounted into the image, the model patch
// applied and the same evaluation script run; the log is graded like msb's.
func podmanEvalRow(ctx context.Context, cfg engine.Config, gen *demo.Generated, dir string, o EvalOptions, msb Stats) Row {
	name := "podman run --rm: the same evaluation (host /usr, venv, repo as :O volume)"
	if _, err := exec.LookPath("podman"); err != nil || o.PodmanImage == "" {
		return Row{Name: name, Failed: "needs podman and MSB_BENCH_PODMAN_IMAGE"}
	}
	cache, err := envcache.Open(envcache.Options{Dir: cfg.Cache.Dir})
	if err != nil {
		return Row{Name: name, Failed: err.Error()}
	}
	var d []time.Duration
	for round := 0; round < o.Rounds; round++ {
		for _, in := range gen.Instances {
			el, err := podmanEvaluate(ctx, cache, in, cfg.Overrides, dir, o)
			if err != nil {
				return Row{Name: name, Failed: fmt.Sprintf("%s: %v", in.InstanceID, err)}
			}
			d = append(d, el)
		}
	}
	s := Summarize(d)
	r := Row{Name: name, Stats: s}
	if s.P50 > 0 {
		r.Note = fmt.Sprintf("msb whole evaluation p50 = %.1f%% of this", 100*float64(msb.P50)/float64(s.P50))
	}
	return r
}

func podmanEvaluate(ctx context.Context, cache *envcache.Cache, in dataset.Instance, ov *spec.Overrides, dir string, o EvalOptions) (time.Duration, error) {
	t, err := task.New(in, ov)
	if err != nil {
		return 0, err
	}
	p, err := cache.Prepare(ctx, in, t.Spec, nil)
	if err != nil {
		return 0, err
	}
	defer p.Release()
	env, err := layerTree(cache, p.EnvLayer)
	if err != nil {
		return 0, err
	}
	repo, err := layerTree(cache, p.RepoLayer)
	if err != nil {
		return 0, err
	}
	if len(p.RepoStack) > 1 {
		if repo, err = wholeTree(ctx, cache.Store(), filepath.Join(dir, "whole"), p.RepoStack); err != nil {
			return 0, err
		}
	}
	work := filepath.Join(dir, "podman-"+in.InstanceID)
	if err := os.MkdirAll(work, 0o755); err != nil {
		return 0, err
	}
	script := "cd /testbed && git apply --verbose /msb/patch.diff >&2\n" + task.EvalScript(t)
	for name, body := range map[string]string{"patch.diff": in.Patch, "eval.sh": script} {
		if err := os.WriteFile(filepath.Join(work, name), []byte(body), 0o644); err != nil {
			return 0, err
		}
	}
	args := append(append([]string{}, o.PodmanFlags...), "run", "--rm", "--network=none",
		"-v", "/usr:/usr:ro", "-v", "/lib:/lib:ro", "-v", "/lib64:/lib64:ro", "-v", "/etc:/etc:ro",
		"-v", filepath.Join(env, "opt/msb/venv")+":/opt/msb/venv:ro", "-v", filepath.Join(repo, "testbed")+":/testbed:O",
		"-v", work+":/msb:ro", "-e", "PATH=/opt/msb/venv/bin:/usr/bin:/bin", "-e", "HOME=/root",
		"-w", "/testbed", o.PodmanImage, "/usr/bin/bash", "/msb/eval.sh")
	start := time.Now()
	out, _ := exec.CommandContext(ctx, "podman", args...).CombinedOutput()
	el := time.Since(start)
	parse, err := grading.Lookup(t.Spec.LogParser)
	if err != nil {
		return 0, err
	}
	v := grading.Judge(grading.Evaluation{InstanceID: in.InstanceID, Repo: in.Repo, Patch: &in.Patch, Log: string(out), Parse: parse,
		Expected: grading.Expected{FailToPass: in.FailToPass, PassToPass: in.PassToPass}})
	if v.Outcome != api.OutcomeResolved {
		return 0, fmt.Errorf("podman evaluation: %s %s: %s", v.Outcome, v.Detail, lastLine(string(out)))
	}
	return el, nil
}

// layerTree is the materialized tree of a layer named by digest.
func layerTree(c *envcache.Cache, digest string) (string, error) {
	id, err := store.ParseLayerID(digest)
	if err != nil {
		return "", err
	}
	return c.Store().TreePath(id), nil
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
