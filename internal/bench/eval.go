package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/minisandbox/msb/internal/dataset"
	"github.com/minisandbox/msb/internal/demo"
	"github.com/minisandbox/msb/internal/envcache"
	"github.com/minisandbox/msb/internal/eval"
	"github.com/minisandbox/msb/internal/grading"
	"github.com/minisandbox/msb/internal/sandbox"
	"github.com/minisandbox/msb/internal/spec"
)

// EvalOptions size the evaluation benchmark.
type EvalOptions struct {
	Rounds int  // evaluations of each demo instance
	Podman bool // measure podman run --rm of a local image, the floor of a container's per-instance cost
}

// Eval measures the per-instance overhead of an evaluation outside the test
// run itself (cached layers looked up, sandbox created, patch applied, log
// parsed and graded, sandbox closed) on the generated demo instances, with
// a warm cache.
func Eval(ctx context.Context, rt *sandbox.Runtime, o EvalOptions) []Row {
	dir, err := os.MkdirTemp("", "msb-bench-eval-")
	if err != nil {
		return []Row{{Name: "eval", Failed: err.Error()}}
	}
	defer os.RemoveAll(dir)
	gen, err := demo.Generate(ctx, dir)
	if err != nil {
		return []Row{{Name: "eval", Failed: err.Error()}}
	}
	ov, err := spec.ParseOverrides([]byte(demo.SpecYAML(gen.PyVersion)))
	if err != nil {
		return []Row{{Name: "eval", Failed: err.Error()}}
	}
	cache, err := envcache.Open(envcache.Options{Dir: filepath.Join(dir, "cache"), Runtime: rt})
	if err != nil {
		return []Row{{Name: "eval", Failed: err.Error()}}
	}
	opts := eval.Options{Cache: cache, Runtime: rt, Overrides: ov}
	var overhead, tests, total []time.Duration
	for round := -1; round < o.Rounds; round++ {
		for _, in := range gen.Instances {
			p := in.Patch
			start := time.Now()
			res := eval.Evaluate(ctx, opts, in, eval.Prediction{InstanceID: in.InstanceID, Patch: &p})
			el := time.Since(start)
			if res.Outcome != "resolved" {
				return []Row{{Name: "eval", Failed: fmt.Sprintf("%s: %s %s", in.InstanceID, res.Outcome, res.Detail)}}
			}
			if round < 0 {
				continue // the first round builds the environment
			}
			total = append(total, el)
			tests = append(tests, res.Timings["tests"])
			overhead = append(overhead, el-res.Timings["tests"])
		}
	}
	ov50 := Summarize(overhead)
	rows := []Row{
		{Name: "msb eval: per-instance overhead outside the tests", Stats: ov50, Note: "layers lookup + sandbox + patch + parse/grade + close"},
		{Name: "msb eval: the test run itself", Stats: Summarize(tests)},
		{Name: "msb eval: whole evaluation", Stats: Summarize(total)},
	}
	if o.Podman {
		r := podmanRow(len(overhead), ov50)
		r.Name = "podman run --rm (container floor, no work)"
		rows = append(rows, r)
		rows = append(rows, podmanEvalRow(ctx, cache, gen, ov, dir, o.Rounds, Summarize(total)))
	}
	return rows
}

// podmanEvalRow does the same evaluation work in `podman run --rm`: the
// host's /usr, the cached venv and the repository (as a podman overlay
// volume, so writes are discarded) mounted into the image, the model patch
// applied and the same evaluation script run; the log is graded like msb's.
func podmanEvalRow(ctx context.Context, cache *envcache.Cache, gen *demo.Generated, ov *spec.Overrides, dir string, rounds int, msb Stats) Row {
	name := "podman run --rm: the same evaluation (host /usr, venv, repo as :O volume)"
	img := os.Getenv("MSB_BENCH_PODMAN_IMAGE")
	if _, err := exec.LookPath("podman"); err != nil || img == "" {
		return Row{Name: name, Failed: "needs podman and MSB_BENCH_PODMAN_IMAGE"}
	}
	var d []time.Duration
	for round := 0; round < rounds; round++ {
		for _, in := range gen.Instances {
			el, err := podmanEvaluate(ctx, cache, in, ov, dir, img)
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

func podmanEvaluate(ctx context.Context, cache *envcache.Cache, in dataset.Instance, ov *spec.Overrides, dir, img string) (time.Duration, error) {
	sp, err := spec.Resolve(in, ov)
	if err != nil {
		return 0, err
	}
	p, err := cache.Prepare(ctx, in, sp, nil)
	if err != nil {
		return 0, err
	}
	defer p.Release()
	work := filepath.Join(dir, "podman-"+in.InstanceID)
	os.MkdirAll(work, 0o755)
	script := "cd /testbed && git apply --verbose /tmp/msb-eval/model.patch >&2\n" + eval.EvalScript(in, sp)
	for name, body := range map[string]string{"model.patch": in.Patch, "test.patch": in.TestPatch, "eval.sh": script} {
		if err := os.WriteFile(filepath.Join(work, name), []byte(body), 0o644); err != nil {
			return 0, err
		}
	}
	env, repo := p.Layers[len(p.Layers)-2], p.Layers[len(p.Layers)-1]
	args := append(strings.Fields(os.Getenv("MSB_BENCH_PODMAN_FLAGS")), "run", "--rm", "--network=none",
		"-v", "/usr:/usr:ro", "-v", "/lib:/lib:ro", "-v", "/lib64:/lib64:ro", "-v", "/etc:/etc:ro",
		"-v", filepath.Join(env, "opt/msb/venv")+":/opt/msb/venv:ro", "-v", filepath.Join(repo, "testbed")+":/testbed:O",
		"-v", work+":/tmp/msb-eval:ro", "-e", "PATH=/opt/msb/venv/bin:/usr/bin:/bin", "-e", "HOME=/root",
		"-w", "/testbed", img, "/usr/bin/bash", "/tmp/msb-eval/eval.sh")
	start := time.Now()
	out, _ := exec.CommandContext(ctx, "podman", args...).CombinedOutput()
	el := time.Since(start)
	parse, err := grading.Lookup(sp.LogParser)
	if err != nil {
		return 0, err
	}
	v := grading.Judge(grading.Evaluation{InstanceID: in.InstanceID, Repo: in.Repo, Patch: &in.Patch, Log: string(out), Parse: parse,
		Expected: grading.Expected{FailToPass: in.FailToPass, PassToPass: in.PassToPass}})
	if v.Outcome != grading.OutcomeResolved {
		return 0, fmt.Errorf("podman evaluation: %s %s: %s", v.Outcome, v.Detail, lastLine(string(out)))
	}
	return el, nil
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
