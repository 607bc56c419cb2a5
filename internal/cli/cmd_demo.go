//go:build !msblean

package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/dataset"
	"github.com/minisandbox/msb/internal/demo"
	"github.com/minisandbox/msb/internal/engine"
	"github.com/minisandbox/msb/internal/harness"
)

func newDemoCmd(g *globals) *cobra.Command {
	var dir string
	var keep bool
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "The main job on an embedded default, offline: sandboxes, sessions, cache, validation and grading",
		Long: `msb demo generates a small Python project with four bug instances (no network),
shows a sandbox and a persistent session, builds the environment cache, and validates
every instance by grading its gold and its empty patch, each in a fresh sandbox,
printing the verdicts and per-phase timings. With --dir the project, dataset, spec file,
cache and logs stay there; without it they go to a temp dir that is removed at the end
unless --keep.`,
		Example: "  msb demo\n  msb demo --dir demo",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDemo(cmd.Context(), g, dir, keep)
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "where to generate the project, dataset, spec file, cache and logs (kept)")
	cmd.Flags().BoolVar(&keep, "keep", false, "keep the temp dir when no --dir is given")
	return cmd
}

func runDemo(ctx context.Context, g *globals, dir string, keep bool) error {
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp(g.env.TmpDir, "msb-demo-"); err != nil {
			return err
		}
		if !keep {
			defer func() {
				if err := os.RemoveAll(dir); err != nil {
					fmt.Fprintf(os.Stderr, "msb: removing %s: %v\n", dir, err)
				}
			}()
		}
	} else {
		keep = true
	}
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	// With --json, stdout holds the validation report alone.
	w := io.Writer(os.Stdout)
	if g.json {
		w = os.Stderr
	}
	start := time.Now()
	gen, err := demo.Generate(ctx, dir)
	if err != nil {
		return fmt.Errorf("generating the demo project: %w", err)
	}
	e, err := g.openEngine(ctx, engineOptions{specFile: gen.SpecPath, cacheDir: filepath.Join(dir, "cache"), timeout: 5 * time.Minute, batch: true})
	if err != nil {
		return err
	}
	defer closeEngine(e, "demo")
	if err := showSandbox(ctx, w, e); err != nil {
		return err
	}
	fmt.Fprintf(w, "\ngenerated %s: %d bug instances of %s in %s (python %s)\n", dir, len(gen.Instances), demo.Repo, FormatDuration(time.Since(start)), gen.PyVersion)
	if _, err := e.LoadDataset(gen.DatasetPath, dataset.Filter{}, false); err != nil {
		return err
	}
	out := harness.New(filepath.Join(dir, "logs"))
	ids := e.InstanceIDs()
	// The environment is built once, by whichever evaluation asks first;
	// the others wait for it.
	prog := newProgress("validating", 2*len(ids), g.json)
	rep, runErr := e.RunValidation(ctx, engine.ValidateRun{RunID: "demo", InstanceIDs: ids, Workers: 2, Progress: resultProgress(prog),
		BuildEvents: newBuildProgress(prog, "validating").event}, out)
	prog.stop()
	if err := finishValidation(g, out, rep, runErr); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nall in %s\n", FormatDuration(time.Since(start)))
	if keep {
		fmt.Fprintf(w, "the dataset, spec file, cache and logs are in %s; grade again with:\n  msb validate --dataset %s --spec %s --cache %s --out %s\n",
			dir, gen.DatasetPath, gen.SpecPath, filepath.Join(dir, "cache"), filepath.Join(dir, "logs"))
	} else {
		fmt.Fprintln(w, "(the temp dir is removed; msb demo --dir DIR keeps the dataset, spec file, cache and logs)")
	}
	for _, v := range rep.Validations {
		if !v.Valid {
			return fmt.Errorf("demo instance %s did not validate: %s", v.InstanceID, v.Reason)
		}
	}
	return nil
}

// demoStep is one line of the demo's isolation table.
type demoStep struct {
	what, got string
	took      time.Duration
	ok        bool
}

// showSandbox creates a sandbox through the engine and shows what it
// isolates and that a session keeps its state.
func showSandbox(ctx context.Context, w io.Writer, e *engine.Engine) error {
	en := e.Enforcement()
	fmt.Fprintf(w, "msb demo: mode %s; limits enforced by: memory %s; pids %s; cpu %s; /tmp %s\n\n", e.Mode(), en.Memory, en.Pids, en.CPU, en.Tmp)
	var steps []demoStep
	step := func(what string, f func() (string, bool, error)) {
		start := time.Now()
		got, ok, err := f()
		if err != nil {
			got, ok = err.Error(), false
		}
		steps = append(steps, demoStep{what, got, time.Since(start), ok})
	}
	var sb *engine.Sandbox
	step("create a sandbox (host base, no network, 512M, 256 pids)", func() (string, bool, error) {
		var err error
		sb, err = e.CreateSandbox(ctx, engine.SandboxRequest{HostBase: true, Workdir: "/work", Labels: map[string]string{"demo": "isolation"},
			Limits: api.Limits{MemoryBytes: 512 << 20, Pids: 256}})
		if err != nil {
			return "", false, err
		}
		return "id " + sb.ID(), true, nil
	})
	if sb == nil {
		printSteps(w, steps)
		return fmt.Errorf("%w: run msb doctor", errUnavailable)
	}
	defer sb.Close()
	timeout := 10 * time.Second
	exec := func(what, cmd string, want func(api.ExecResult) bool) {
		step(what, func() (string, bool, error) {
			res, err := sb.Exec(ctx, api.ExecRequest{Session: "agent", Command: cmd, TimeoutNs: int64(timeout)})
			out := strings.TrimSpace(res.Stdout)
			if res.TimedOut {
				out += " [timed out]"
			}
			return firstLine(strings.ReplaceAll(out, "\n", " | ")), want(res), err
		})
	}
	step("open a persistent bash session", func() (string, bool, error) {
		return "session agent", true, sb.OpenSession(ctx, api.SessionRequest{Name: "agent"})
	})
	ok0 := func(r api.ExecResult) bool { return r.ExitCode == 0 }
	exec("who am I, where am I", "echo $(id -u)@$(hostname):$PWD", ok0)
	exec("state persists: cd + export", "cd /tmp && export ANSWER=42", ok0)
	exec("... in the next command", "echo $PWD $ANSWER", func(r api.ExecResult) bool { return strings.TrimSpace(r.Stdout) == "/tmp 42" })
	exec("PID namespace: processes visible", "ls /proc | grep -c '^[0-9]'", ok0)
	exec("host /usr is read-only", "touch /usr/x 2>&1", func(r api.ExecResult) bool { return r.ExitCode != 0 })
	exec("no network beyond loopback", "timeout 2 bash -c 'echo > /dev/tcp/1.1.1.1/80' 2>&1 || echo unreachable", func(r api.ExecResult) bool { return strings.Contains(r.Stdout, "unreachable") })
	exec("mount is refused (seccomp)", "mkdir -p /tmp/m && mount -t tmpfs x /tmp/m 2>&1", func(r api.ExecResult) bool { return r.ExitCode != 0 })
	timeout = 300 * time.Millisecond
	exec("a 300ms timeout interrupts `sleep 60`", "sleep 60", func(r api.ExecResult) bool { return r.TimedOut })
	timeout = 10 * time.Second
	exec("... and answers again", "echo $ANSWER", func(r api.ExecResult) bool { return strings.TrimSpace(r.Stdout) == "42" })
	step("close: kill everything, remove upper dir", func() (string, bool, error) {
		return "closed", true, sb.Close()
	})
	printSteps(w, steps)
	for _, s := range steps {
		if !s.ok {
			return fmt.Errorf("demo step %q did not behave as expected", s.what)
		}
	}
	return nil
}

func printSteps(w io.Writer, steps []demoStep) {
	for _, s := range steps {
		mark := "ok "
		if !s.ok {
			mark = "BAD"
		}
		fmt.Fprintf(w, "%s %-42s %9s  %s\n", mark, s.what, FormatDuration(s.took), s.got)
	}
}
