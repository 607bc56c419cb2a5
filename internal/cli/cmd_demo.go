package cli

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/minisandbox/msb/internal/sandbox"
	"github.com/minisandbox/msb/internal/session"
	"github.com/spf13/cobra"
)

func newDemoCmd(g *globals) *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "The main job on an embedded default, offline: sandboxes, sessions, cache, validation and grading",
		Long: `msb demo generates a small Python project with four bug instances (no network),
shows a sandbox and a persistent session, builds the environment cache, and validates and
grades the gold and the empty patch of every instance concurrently, each in a fresh sandbox,
printing the verdicts and per-phase timings.`,
		Example: "  msb demo\n  msb demo --dir /tmp/msb-demo",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := runDemo(cmd.Context(), g); err != nil {
				return err
			}
			return runGradingDemo(cmd.Context(), g, dir)
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "where to generate the project, dataset, cache and logs (default a new temp dir, kept)")
	return cmd
}

// demoStep is one line of the demo's table.
type demoStep struct {
	what, got string
	took      time.Duration
	ok        bool
}

func runDemo(ctx context.Context, g *globals) error {
	rt, err := g.jobRuntime()
	if err != nil {
		return err
	}
	fmt.Printf("msb demo: mode %s; limits: %+v\n\n", rt.Mode(), rt.Enforcement())
	var steps []demoStep
	step := func(what string, f func() (string, bool, error)) {
		start := time.Now()
		got, ok, err := f()
		if err != nil {
			got, ok = err.Error(), false
		}
		steps = append(steps, demoStep{what, got, time.Since(start), ok})
	}
	var sb *sandbox.Sandbox
	step("create a sandbox (host base, no network, 512M, 256 pids)", func() (string, bool, error) {
		var err error
		sb, err = rt.Create(ctx, sandbox.Config{HostBase: true, Workdir: "/work", Limits: sandbox.Limits{MemoryBytes: 512 << 20, Pids: 256}})
		if err != nil {
			return "", false, err
		}
		return "id " + sb.ID, true, nil
	})
	if sb == nil {
		printSteps(steps)
		return fmt.Errorf("%w: run msb doctor", errUnavailable)
	}
	defer sb.Close()
	timeout := 10 * time.Second
	exec := func(what, cmd string, want func(session.Result) bool) {
		step(what, func() (string, bool, error) {
			res, err := sb.SessionExec(ctx, "agent", session.ExecRequest{Command: cmd, Timeout: timeout})
			out := strings.TrimSpace(res.Output)
			if res.TimedOut {
				out += " [timed out]"
			}
			return oneLine(out), want(res), err
		})
	}
	step("open a persistent bash session", func() (string, bool, error) {
		return "session agent", true, sb.OpenSession(ctx, "agent", sandbox.SessionOptions{})
	})
	ok0 := func(r session.Result) bool { return r.ExitCode == 0 }
	exec("who am I, where am I", "echo $(id -u)@$(hostname):$PWD", ok0)
	exec("state persists: cd + export", "cd /tmp && export ANSWER=42", ok0)
	exec("... in the next command", "echo $PWD $ANSWER", func(r session.Result) bool { return strings.TrimSpace(r.Output) == "/tmp 42" })
	exec("PID namespace: processes visible", "ls /proc | grep -c '^[0-9]'", ok0)
	exec("host /usr is read-only", "touch /usr/x 2>&1", func(r session.Result) bool { return r.ExitCode != 0 })
	exec("no network beyond loopback", "timeout 2 bash -c 'echo > /dev/tcp/1.1.1.1/80' 2>&1 || echo unreachable", func(r session.Result) bool { return strings.Contains(r.Output, "unreachable") })
	exec("mount is refused (seccomp)", "mkdir -p /tmp/m && mount -t tmpfs x /tmp/m 2>&1", func(r session.Result) bool { return r.ExitCode != 0 })
	timeout = 300 * time.Millisecond
	exec("a 300ms timeout interrupts `sleep 60`", "sleep 60", func(r session.Result) bool { return r.TimedOut })
	timeout = 10 * time.Second
	exec("... and answers again", "echo $ANSWER", func(r session.Result) bool { return strings.TrimSpace(r.Output) == "42" })
	step("close: kill everything, remove upper dir", func() (string, bool, error) {
		return "closed", true, sb.Close()
	})
	printSteps(steps)
	for _, s := range steps {
		if !s.ok {
			return fmt.Errorf("demo step %q did not behave as expected", s.what)
		}
	}
	return nil
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " | ")
	if len(s) > 60 {
		s = s[:57] + "..."
	}
	return s
}

func printSteps(steps []demoStep) {
	for _, s := range steps {
		mark := "ok "
		if !s.ok {
			mark = "BAD"
		}
		fmt.Fprintf(os.Stdout, "%s %-42s %9s  %s\n", mark, s.what, fmtDur(s.took), s.got)
	}
}
