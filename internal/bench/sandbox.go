package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/minisandbox/msb/internal/cgroup"
	"github.com/minisandbox/msb/internal/sandbox"
	"github.com/minisandbox/msb/internal/session"
)

// SandboxOptions size the sandbox benchmarks.
type SandboxOptions struct {
	Iterations int // create→command→close rounds per method
	RoundTrips int // session `true` round trips
	Workers    int // for throughput
	Duration   time.Duration
	Density    int // idle sandboxes held at once
	Podman     bool
}

// Row is one line of the report.
type Row struct {
	Name   string  `json:"name"`
	Stats  Stats   `json:"stats,omitempty"`
	Value  float64 `json:"value,omitempty"`
	Unit   string  `json:"unit,omitempty"`
	Note   string  `json:"note,omitempty"`
	Failed string  `json:"failed,omitempty"`
}

// Sandbox runs the sandbox benchmarks with rt.
func Sandbox(ctx context.Context, rt *sandbox.Runtime, o SandboxOptions) []Row {
	var rows []Row
	msb, err := timeRounds(o.Iterations, func() error { return msbRound(ctx, rt) })
	rows = append(rows, row("msb: create → `true` answered → close", msb, err))
	paper, err := timeRounds(o.Iterations, func() error { return paperRound(rt.StateDir()) })
	r := row("paper: unshare+bind+chroot+bash (shell)", paper, err)
	if err == nil && msb.P50 > 0 {
		r.Note = fmt.Sprintf("msb p50 = %.2fx of this", float64(msb.P50)/float64(paper.P50))
	}
	rows = append(rows, r)
	if o.Podman {
		rows = append(rows, podmanRow(o.Iterations, msb))
	}
	rt1, err := sessionRoundTrips(ctx, rt, o.RoundTrips)
	rows = append(rows, row("msb: session round trip (`true`)", rt1, err))
	rows = append(rows, throughput(ctx, rt, o.Workers, o.Duration))
	rows = append(rows, density(ctx, rt, o.Density))
	return rows
}

func row(name string, s Stats, err error) Row {
	r := Row{Name: name, Stats: s}
	if err != nil {
		r.Failed = err.Error()
	}
	return r
}

func timeRounds(n int, f func() error) (Stats, error) {
	var d []time.Duration
	for i := 0; i < n; i++ {
		start := time.Now()
		if err := f(); err != nil {
			return Summarize(d), err
		}
		d = append(d, time.Since(start))
	}
	return Summarize(d), nil
}

func msbRound(ctx context.Context, rt *sandbox.Runtime) error {
	sb, err := rt.Create(ctx, sandbox.Config{HostBase: true})
	if err != nil {
		return err
	}
	res, err := sb.Exec(ctx, session.ExecRequest{Command: "true"})
	cerr := sb.Close()
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("true exited %d", res.ExitCode)
	}
	return cerr
}

// paperScript is the paper's mechanism: a mount namespace, read-only binds
// of the host's system dirs into a task dir, chroot, and bash.
const paperScript = `set -e
d=$(mktemp -d -p "$1")
for x in usr bin lib lib64 etc; do
  if [ -L /$x ]; then ln -s "$(readlink /$x)" "$d/$x"; else mkdir -p "$d/$x"; mount --bind -o ro /$x "$d/$x"; fi
done
chroot "$d" /bin/bash -c true
for x in usr bin lib lib64 etc; do umount "$d/$x" 2>/dev/null || true; done
rm -rf --one-file-system "$d"
`

func paperRound(stateDir string) error {
	args := []string{"--mount", "--propagation", "private", "bash", "-c", paperScript, "paper", stateDir}
	if os.Geteuid() != 0 {
		args = append([]string{"--map-root-user"}, args...)
	}
	out, err := exec.Command("unshare", args...).CombinedOutput()
	if err != nil {
		if len(out) > 500 {
			out = out[:500]
		}
		return fmt.Errorf("%v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

func podmanRow(n int, msb Stats) Row {
	if _, err := exec.LookPath("podman"); err != nil {
		return Row{Name: "podman run --rm", Failed: "podman not installed"}
	}
	img := os.Getenv("MSB_BENCH_PODMAN_IMAGE")
	if img == "" {
		return Row{Name: "podman run --rm", Failed: "set MSB_BENCH_PODMAN_IMAGE to a local image (no registry is reached)"}
	}
	// MSB_BENCH_PODMAN_FLAGS are global podman flags, e.g. "--runtime runc
	// --cgroup-manager cgroupfs" on a hybrid cgroup host crun refuses.
	args := append(strings.Fields(os.Getenv("MSB_BENCH_PODMAN_FLAGS")), "run", "--rm", "--network=none", img, "true")
	s, err := timeRounds(n, func() error {
		out, err := exec.Command("podman", args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v: %s", err, strings.TrimSpace(string(out)))
		}
		return nil
	})
	r := row("podman run --rm "+img+" true", s, err)
	if err == nil && s.P50 > 0 {
		r.Note = fmt.Sprintf("msb p50 = %.1f%% of this", 100*float64(msb.P50)/float64(s.P50))
	}
	return r
}

func sessionRoundTrips(ctx context.Context, rt *sandbox.Runtime, n int) (Stats, error) {
	sb, err := rt.Create(ctx, sandbox.Config{HostBase: true})
	if err != nil {
		return Stats{}, err
	}
	defer sb.Close()
	if err := sb.OpenSession(ctx, "bench", sandbox.SessionOptions{}); err != nil {
		return Stats{}, err
	}
	return timeRounds(n, func() error {
		_, err := sb.SessionExec(ctx, "bench", session.ExecRequest{Command: "true"})
		return err
	})
}

func throughput(ctx context.Context, rt *sandbox.Runtime, workers int, d time.Duration) Row {
	var done, failed atomic.Int64
	var firstErr atomic.Value
	deadline := time.Now().Add(d)
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				if err := msbRound(ctx, rt); err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	el := time.Since(start).Seconds()
	r := Row{Name: fmt.Sprintf("msb: throughput, %d workers", workers), Value: float64(done.Load()) / el, Unit: "sandboxes/s",
		Note: fmt.Sprintf("%d created+closed in %.1fs", done.Load(), el)}
	if failed.Load() > 0 {
		r.Failed = fmt.Sprintf("%d failed, first: %v", failed.Load(), firstErr.Load())
	}
	return r
}

// density holds n idle sandboxes with one session each and reports host
// memory per sandbox: the drop in MemAvailable, and the summed PSS of the
// sandboxes' processes.
func density(ctx context.Context, rt *sandbox.Runtime, n int) Row {
	name := fmt.Sprintf("msb: density, %d idle sandboxes with a session", n)
	before := cgroup.MemAvailable()
	var sbs []*sandbox.Sandbox
	defer func() {
		for _, sb := range sbs {
			sb.Close()
		}
	}()
	for i := 0; i < n; i++ {
		sb, err := rt.Create(ctx, sandbox.Config{HostBase: true})
		if err != nil {
			return Row{Name: name, Failed: fmt.Sprintf("after %d sandboxes: %v", i, err)}
		}
		sbs = append(sbs, sb)
		if err := sb.OpenSession(ctx, "s", sandbox.SessionOptions{}); err != nil {
			return Row{Name: name, Failed: fmt.Sprintf("session %d: %v", i, err)}
		}
	}
	time.Sleep(500 * time.Millisecond)
	used := before - cgroup.MemAvailable()
	var pss int64
	for _, sb := range sbs {
		pss += treePSS(sb.InitPid())
	}
	return Row{Name: name, Value: float64(pss) / float64(n) / (1 << 20), Unit: "MiB PSS/sandbox",
		Note: fmt.Sprintf("MemAvailable dropped %.1f MiB in all (%.2f MiB/sandbox, includes page cache and kernel objects)", float64(used)/(1<<20), float64(used)/float64(n)/(1<<20))}
}

// treePSS sums Pss of pid and its descendants (from /proc/*/stat ppid).
func treePSS(root int) int64 {
	children := map[int][]int{}
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", p.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) > 1 {
			ppid, _ := strconv.Atoi(f[1])
			children[ppid] = append(children[ppid], pid)
		}
	}
	var total int64
	stack := []int{root}
	for len(stack) > 0 {
		pid := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		total += pssOf(pid)
		stack = append(stack, children[pid]...)
	}
	return total
}

func pssOf(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "Pss:") {
			f := strings.Fields(line)
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}
