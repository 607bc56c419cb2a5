package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// processRunner is a method that runs a command as a whole process: one
// command line that makes an isolated task, runs `true` in it, removes the
// task and exits, the way a script or a test harness runs one command.
type processRunner interface {
	name() string
	// runProcess runs `true` so, and returns once everything is removed.
	runProcess(ctx context.Context) error
	// processFiles are what a cold trial drops first: the programs the
	// process runs and what its task reads.
	processFiles(ctx context.Context) ([]string, error)
}

// process times the whole process, per round and method: `msb run --
// true` (the msb binary, as a user runs it), the paper's bare pipeline
// (its task dir laid out, `unshare --mount --pid --fork` of the binds and
// `chroot DIR /bin/true`, then `rm -rf` of the dir) and `podman run --rm
// --network none BASE true`. Each is timed from the start of the first
// program until everything it made is removed. With Cold, a cold trial
// (the method's programs dropped from the page cache) comes before each
// warm one. The bare workload only: what a task holds is the other
// measures' business.
func (b *bencher) process(ctx context.Context, w *workload) {
	var rs []processRunner
	if b.uses(MethodMSB) {
		if exe, err := b.msbBinary(); err != nil {
			b.note(noteSkipped, "process msb: %v", err)
		} else {
			rs = append(rs, &msbProcess{exe: exe, args: b.o.MSBArgs})
		}
	}
	if b.uses(MethodPaper) {
		rs = append(rs, &paperMethod{wl: w, tasks: b.tasksDir(), rootless: b.rt.Rootless()})
	}
	if b.pm != nil && b.uses(MethodPodman) {
		rs = append(rs, &podmanMethod{pm: b.pm, wl: w})
	}
	byName := map[string]processRunner{}
	var names []string
	for _, r := range rs {
		byName[r.name()] = r
		names = append(names, r.name())
	}
	caches := []string{Warm}
	if b.o.Cold {
		caches = []string{Cold, Warm}
	}
	failed := interleave(ctx, b.o.Rounds, b.o.Warmup, names, func(ctx context.Context, round, slot int, name string) error {
		r := byName[name]
		for _, c := range caches {
			if c == Cold {
				if err := b.dropFor(ctx, w, MeasureProcess, name, round, slot, r.processFiles); err != nil {
					return err
				}
			}
			t0 := time.Now()
			if err := r.runProcess(ctx); err != nil {
				return err
			}
			if round >= 0 {
				b.add(Sample{Key: Key{Measure: MeasureProcess, Workload: w.name, Method: name, Phase: PhaseRun, Cache: c},
					Round: round, Slot: slot, Value: time.Since(t0).Seconds(), Unit: UnitSeconds})
			}
		}
		return nil
	})
	b.failures(MeasureProcess, w, failed)
}

// PhaseRun is the process measure's one phase: the whole process.
const PhaseRun = "run"

// msbBinary is Options.MSB, else msb next to this executable, else on
// PATH.
func (b *bencher) msbBinary() (string, error) {
	if b.o.MSB != "" {
		return b.o.MSB, nil
	}
	if self, err := os.Executable(); err == nil {
		next := filepath.Join(filepath.Dir(self), "msb")
		if fi, err := os.Stat(next); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return next, nil
		}
	}
	if p, err := exec.LookPath("msb"); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("%w: no msb binary next to this one or on PATH (make build, or Options.MSB)", errSkipped)
}

// msbProcess is `msb [args] run -- true`.
type msbProcess struct {
	exe  string
	args []string // msb's global flags, e.g. --state-dir
}

func (p *msbProcess) name() string { return MethodMSB }

func (p *msbProcess) runProcess(ctx context.Context) error {
	args := append(append([]string{}, p.args...), "run", "--", "true")
	if out, err := exec.CommandContext(ctx, p.exe, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %w: %s", p.exe, strings.Join(args, " "), err, tail(string(out), 400))
	}
	return nil
}

// processFiles are the msb binary and the sandbox binary beside it, if
// any (msb-sandbox, which msb runs as the sandbox's init).
func (p *msbProcess) processFiles(context.Context) ([]string, error) {
	return []string{p.exe, filepath.Join(filepath.Dir(p.exe), "msb-sandbox")}, nil
}

// runProcess is the paper's bare pipeline: a task dir laid out, the
// system dirs bound into it in new mount and PID namespaces, /bin/true
// run in the chroot, and the dir removed.
func (m *paperMethod) runProcess(ctx context.Context) error {
	d, err := os.MkdirTemp(m.tasks, "task-")
	if err != nil {
		return err
	}
	t := &paperTask{dir: d}
	cmd, err := m.shellCommand(d, "/bin/true")
	if err == nil {
		if out, rerr := cmd.CombinedOutput(); rerr != nil {
			err = fmt.Errorf("unshare of the paper's pipeline: %w: %s", rerr, tail(string(out), 400))
		}
	}
	if rerr := t.removeDir(); err == nil {
		err = rerr
	}
	return err
}

// processFiles are the programs of the paper's pipeline.
func (m *paperMethod) processFiles(ctx context.Context) ([]string, error) {
	var fs []string
	for _, t := range paperTools {
		if p, err := exec.LookPath(t); err == nil {
			fs = append(fs, p)
		}
	}
	return fs, nil
}

// runProcess is `podman run --rm --network none BASE true`.
func (m *podmanMethod) runProcess(ctx context.Context) error {
	_, err := m.pm.out(ctx, "run", "--rm", "--network", "none", podmanBase, "true")
	return err
}

// processFiles are the base image's layers and podman's programs.
func (m *podmanMethod) processFiles(ctx context.Context) ([]string, error) {
	return m.files(ctx, 0)
}
