// Package harness writes and reads the SWE-bench harness's files, so that
// tools made for the harness read msb's runs unchanged.
//
// The nouns:
//
//   - Dir: the root of evaluation logs (the harness's logs/run_evaluation).
//     A run's files are under <root>/<run_id>/: per model
//     (model_name_or_path with "/" written "__") and instance,
//     <model>/<instance_id>/ holds what the harness leaves for the
//     evaluation's outcome, and <model>.<run_id>.json is the model's run
//     summary. Dir is an engine.Sink.
//   - Files per outcome, as the harness writes them: an empty patch that is
//     not graded leaves nothing; every evaluation that ran leaves
//     run_instance.log; one that reached the patch leaves patch.diff; one
//     whose patch applied leaves eval.sh; one whose tests ran (or timed
//     out) leaves test_output.txt; only a verdict (resolved or unresolved)
//     leaves report.json, so the harness's own summary counts everything
//     else as an error. result.json (msb's) is always there for an
//     evaluation that ran: outcome, reward, timings and the digests that
//     key resumption.
//   - Validation files: <root>/<run_id>/valid.json (ids) and invalid.json
//     (id -> reason).
//
// Every name that becomes a path component (run id, model, instance id)
// is checked with api.CheckName, so no input can write outside the root.
package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/atomicfile"
	"github.com/minisandbox/msb/internal/dataset"
)

// The harness's file names.
const (
	ReportFile     = "report.json"
	TestOutputFile = "test_output.txt"
	PatchFile      = "patch.diff"
	EvalScriptFile = "eval.sh"
	RunLogFile     = "run_instance.log"
	// ResultFile is msb's own: the api.EvalResult.
	ResultFile  = "result.json"
	ValidFile   = "valid.json"
	InvalidFile = "invalid.json"
)

// DefaultRoot is the harness's log directory, relative to the working
// directory.
const DefaultRoot = "logs/run_evaluation"

// Dir is a root of run directories.
type Dir struct {
	root string
}

// New returns the Dir at root (created on first write).
func New(root string) *Dir {
	if root == "" {
		root = DefaultRoot
	}
	return &Dir{root: root}
}

// Root is the directory holding the runs.
func (d *Dir) Root() string { return d.root }

// RunDir is where a run's files go.
func (d *Dir) RunDir(runID string) (string, error) {
	if err := api.CheckName("run id", runID); err != nil {
		return "", err
	}
	return filepath.Join(d.root, runID), nil
}

// InstanceDir is where one evaluation's files go.
func (d *Dir) InstanceDir(runID, model, instanceID string) (string, error) {
	run, err := d.RunDir(runID)
	if err != nil {
		return "", err
	}
	m := dataset.ModelDir(model)
	if err := api.CheckName("model_name_or_path", m); err != nil {
		return "", err
	}
	if err := api.CheckName("instance_id", instanceID); err != nil {
		return "", err
	}
	return filepath.Join(run, m, instanceID), nil
}

// SummaryPath is where a model's run summary goes.
func (d *Dir) SummaryPath(runID, model string) (string, error) {
	run, err := d.RunDir(runID)
	if err != nil {
		return "", err
	}
	m := dataset.ModelDir(model)
	if err := api.CheckName("model_name_or_path", m); err != nil {
		return "", err
	}
	return filepath.Join(run, m+"."+runID+".json"), nil
}

// ErrRunBusy: another evaluation (of this process or another) is writing
// an instance of the run.
var ErrRunBusy = errors.New("run is in progress")

// LockDir is the directory of a run that holds its instances' locks.
const LockDir = ".msb-locks"

// LockRun holds the instances ids of the run for one writer until unlock:
// a LockRun of the same run id and root that shares an instance, from any
// process, fails with ErrRunBusy until then. Runs of the same id over other
// instances (msb.ray's one-instance jobs) go on side by side.
func (d *Dir) LockRun(runID string, ids []string) (unlock func(), err error) {
	dir, err := d.RunDir(runID)
	if err != nil {
		return nil, err
	}
	dir = filepath.Join(dir, LockDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var held []*os.File
	unlock = func() {
		for _, f := range held {
			// Unlocked before closed: a child forked meanwhile (a
			// sandbox starting) holds a copy of the descriptor until it
			// execs, and would keep the lock held past the close.
			syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
			f.Close()
		}
	}
	for _, id := range ids {
		if err := api.CheckName("instance_id", id); err != nil {
			unlock()
			return nil, err
		}
		f, err := os.OpenFile(filepath.Join(dir, id), os.O_CREATE|os.O_RDONLY, 0o644)
		if err != nil {
			unlock()
			return nil, err
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			unlock()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				return nil, fmt.Errorf("%w: run id %q: instance %s is being evaluated into %s; wait for it to end or use another run id",
					ErrRunBusy, runID, id, filepath.Dir(dir))
			}
			return nil, fmt.Errorf("locking %s of run %s: %w", id, runID, err)
		}
		held = append(held, f)
	}
	return unlock, nil
}

// Lookup reads the result.json of an earlier evaluation.
func (d *Dir) Lookup(_ context.Context, runID, model, instanceID string) (api.EvalResult, bool, error) {
	dir, err := d.InstanceDir(runID, model, instanceID)
	if err != nil {
		return api.EvalResult{}, false, err
	}
	b, err := os.ReadFile(filepath.Join(dir, ResultFile))
	if errors.Is(err, fs.ErrNotExist) {
		return api.EvalResult{}, false, nil
	}
	if err != nil {
		return api.EvalResult{}, false, err
	}
	var res api.EvalResult
	if json.Unmarshal(b, &res) != nil || res.Outcome == "" {
		return api.EvalResult{}, false, nil // damaged: evaluate again
	}
	return res, true, nil
}

// Put writes one evaluation's files, replacing an earlier evaluation's
// whole directory at once (a stale report.json never survives a changed
// outcome).
func (d *Dir) Put(_ context.Context, runID string, res api.EvalResult, art api.EvalArtifacts) error {
	dir, err := d.InstanceDir(runID, res.Model, res.InstanceID)
	if err != nil {
		return err
	}
	if !art.Ran {
		return removeAll(dir) // the harness leaves nothing for an empty patch
	}
	files := map[string][]byte{RunLogFile: []byte(art.RunLog)}
	if art.PatchWritten {
		files[PatchFile] = []byte(art.Patch)
	}
	if art.ScriptWritten {
		files[EvalScriptFile] = []byte(art.EvalScript)
	}
	if art.TestsRan {
		files[TestOutputFile] = []byte(art.TestOutput)
	}
	if res.Outcome.IsVerdict() {
		if files[ReportFile], err = json.MarshalIndent(api.ReportFile{res.InstanceID: res.Report}, "", "    "); err != nil {
			return err
		}
	}
	if files[ResultFile], err = json.MarshalIndent(res, "", "  "); err != nil {
		return err
	}
	return replaceDir(dir, files)
}

// Summary writes a model's run summary.
func (d *Dir) Summary(_ context.Context, s api.RunSummary) error {
	p, err := d.SummaryPath(s.RunID, s.Model)
	if err != nil {
		return err
	}
	b, err := json.MarshalIndent(s, "", "    ")
	if err != nil {
		return err
	}
	return atomicfile.Write(p, b, atomicfile.Options{DirPerm: 0o755})
}

// WriteValidation writes valid.json and invalid.json of a validation run
// and returns their paths.
func (d *Dir) WriteValidation(rep api.ValidationReport) (valid, invalid string, err error) {
	run, err := d.RunDir(rep.RunID)
	if err != nil {
		return "", "", err
	}
	if err := os.MkdirAll(run, 0o755); err != nil {
		return "", "", err
	}
	valid, invalid = filepath.Join(run, ValidFile), filepath.Join(run, InvalidFile)
	for p, v := range map[string]any{valid: rep.Valid, invalid: rep.Invalid} {
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return "", "", err
		}
		if err := atomicfile.Write(p, b, atomicfile.Options{}); err != nil {
			return "", "", err
		}
	}
	return valid, invalid, nil
}

// replaceDir makes dir hold exactly files: written and synced in a new
// directory beside it, then swapped in.
func replaceDir(dir string, files map[string][]byte) error {
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(dir)+".new-")
	if err != nil {
		return err
	}
	for name, data := range files {
		if err := writeSynced(filepath.Join(tmp, name), data); err != nil {
			os.RemoveAll(tmp)
			return err
		}
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		os.RemoveAll(tmp)
		return err
	}
	old := ""
	if _, err := os.Lstat(dir); err == nil {
		old = tmp + ".old"
		if err := os.Rename(dir, old); err != nil {
			os.RemoveAll(tmp)
			return err
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		os.RemoveAll(tmp)
		return err
	}
	if old != "" {
		if err := os.RemoveAll(old); err != nil {
			return err
		}
	}
	return atomicfile.SyncDir(parent)
}

func removeAll(dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("removing %s: %w", dir, err)
	}
	return nil
}

func writeSynced(p string, data []byte) error {
	f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", p, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("syncing %s: %w", p, err)
	}
	return f.Close()
}
