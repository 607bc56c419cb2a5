package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/minisandbox/msb/internal/demo"
	"github.com/minisandbox/msb/internal/envcache"
	"github.com/minisandbox/msb/internal/eval"
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
	}
	return rows
}
