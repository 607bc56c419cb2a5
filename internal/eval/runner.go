package eval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/minisandbox/msb/internal/dataset"
	"github.com/minisandbox/msb/internal/grading"
)

// RunOptions configure a Runner.
type RunOptions struct {
	Options
	RunID   string
	OutDir  string // root of the run's files (default "logs/run_evaluation")
	Workers int
}

// Runner evaluates a set of predictions and writes the harness's files.
type Runner struct {
	o RunOptions
}

// NewRunner checks o.
func NewRunner(o RunOptions) (*Runner, error) {
	if o.RunID == "" || strings.ContainsAny(o.RunID, "/\x00") {
		return nil, fmt.Errorf("run id %q: give a non-empty name without '/'", o.RunID)
	}
	if o.OutDir == "" {
		o.OutDir = filepath.Join("logs", "run_evaluation")
	}
	if o.Workers <= 0 {
		o.Workers = 1
	}
	if w := memoryWorkers(o.Limits.MemoryBytes); w < o.Workers {
		o.Workers = w
	}
	return &Runner{o: o}, nil
}

// Workers is the concurrency in force (workers, bounded by memory).
func (r *Runner) Workers() int { return r.o.Workers }

// instanceDir is where one instance's files go, as the harness lays them out.
func (r *Runner) instanceDir(model, id string) string {
	return filepath.Join(r.o.OutDir, r.o.RunID, safeName(model), id)
}

func safeName(s string) string {
	if s == "" {
		return "none"
	}
	return strings.NewReplacer("/", "__", "\x00", "").Replace(s)
}

// Done returns the result of an instance finished in an earlier run.
func (r *Runner) Done(model, id string) (Result, bool) {
	b, err := os.ReadFile(filepath.Join(r.instanceDir(model, id), "result.json"))
	if err != nil {
		return Result{}, false
	}
	var res Result
	if json.Unmarshal(b, &res) != nil || res.Outcome == "" {
		return Result{}, false
	}
	return res, true
}

// Progress reports each finished instance.
type Progress func(done, total int, res Result, resumed bool)

// Run evaluates every instance that has a prediction, skipping those
// finished before, and returns the run summary (also written to
// <OutDir>/<run id>/<model>.<run id>.json).
func (r *Runner) Run(ctx context.Context, insts []dataset.Instance, preds map[string]Prediction, progress Progress) (grading.Summary, []Result, error) {
	var todo []dataset.Instance
	var ids, submitted []string
	for _, in := range insts {
		ids = append(ids, in.InstanceID)
		if _, ok := preds[in.InstanceID]; ok {
			todo = append(todo, in)
			submitted = append(submitted, in.InstanceID)
		}
	}
	results := make([]Result, len(todo))
	var mu sync.Mutex // guards done
	done := 0
	jobs := make(chan int)
	var wg sync.WaitGroup
	var writeErr error
	for w := 0; w < r.o.Workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				in, pred := todo[i], preds[todo[i].InstanceID]
				res, resumed := r.Done(pred.Model, in.InstanceID)
				if !resumed {
					if ctx.Err() != nil {
						continue // interrupted: leave it for the next run
					}
					res = Evaluate(ctx, r.o.Options, in, pred)
					if ctx.Err() != nil && !res.Outcome.IsVerdict() {
						continue // cut short by the interrupt, not a real outcome
					}
					if err := r.write(res); err != nil {
						mu.Lock()
						writeErr = errors.Join(writeErr, err)
						mu.Unlock()
					}
				}
				results[i] = res
				mu.Lock()
				done++
				n := done
				mu.Unlock()
				if progress != nil {
					progress(n, len(todo), res, resumed)
				}
			}
		}()
	}
	for i := range todo {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	outcomes := map[string]grading.Outcome{}
	var model string
	for _, res := range results {
		if res.Outcome != "" {
			outcomes[res.InstanceID] = res.Outcome
			model = res.Model
		}
	}
	sum := grading.Summarize(ids, submitted, outcomes)
	if err := r.writeSummary(model, sum); err != nil {
		writeErr = errors.Join(writeErr, err)
	}
	if ctx.Err() != nil {
		return sum, results, fmt.Errorf("interrupted after %d of %d instances (rerun with the same --run-id to resume): %w", done, len(todo), ctx.Err())
	}
	return sum, results, writeErr
}

// write stores an instance's files; result.json last, atomically, since
// its presence marks the instance done.
func (r *Runner) write(res Result) error {
	dir := r.instanceDir(res.Model, res.InstanceID)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	report, _ := json.MarshalIndent(grading.ReportFile{res.InstanceID: res.Report}, "", "    ")
	result, _ := json.MarshalIndent(res, "", "  ")
	for _, f := range []struct {
		name string
		data []byte
	}{
		{"patch.diff", []byte(res.Patch)},
		{"test_output.txt", []byte(res.Log)},
		{"report.json", report},
		{"result.json", result},
	} {
		if err := writeAtomic(filepath.Join(dir, f.name), f.data); err != nil {
			return err
		}
	}
	return nil
}

func (r *Runner) writeSummary(model string, sum grading.Summary) error {
	dir := filepath.Join(r.o.OutDir, r.o.RunID)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, _ := json.MarshalIndent(sum, "", "    ")
	return writeAtomic(filepath.Join(dir, safeName(model)+"."+r.o.RunID+".json"), b)
}

// SummaryPath is where Run writes the summary for model.
func (r *Runner) SummaryPath(model string) string {
	return filepath.Join(r.o.OutDir, r.o.RunID, safeName(model)+"."+r.o.RunID+".json")
}

func writeAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("syncing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// SortedResults orders results by instance id.
func SortedResults(rs []Result) []Result {
	out := make([]Result, 0, len(rs))
	for _, r := range rs {
		if r.InstanceID != "" {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].InstanceID < out[j].InstanceID })
	return out
}
