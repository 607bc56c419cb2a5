package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// method makes tasks of one workload one way (msb, paper, podman).
type method interface {
	name() string
	// create makes task i (an instance index, modulo the workload's
	// instances) ready to take a command.
	create(ctx context.Context, i int) (liveTask, error)
	// files are the method's own files that task i reads: what a cold
	// trial evicts from the page cache first.
	files(ctx context.Context, i int) ([]string, error)
}

// liveTask is one live task of a method.
type liveTask interface {
	// run runs a bash command and fails unless it exits 0.
	run(ctx context.Context, command string) error
	// close ends the task and removes everything it made.
	close() error
	// pids are the host processes whose trees make up the task (PSS).
	pids() []int
	// dirs hold the files the task itself made (disk).
	dirs(ctx context.Context) ([]string, error)
}

// commandTimeout bounds one command of a benchmark task.
const commandTimeout = 2 * time.Minute

// exitError reports a task command that did not exit 0.
func exitError(code int, output string) error {
	output = strings.TrimSpace(output)
	if len(output) > 400 {
		output = "..." + output[len(output)-400:]
	}
	return fmt.Errorf("command exited %d: %s", code, output)
}

// errSkipped marks a method or workload that cannot run on this host; the
// report says why.
var errSkipped = errors.New("skipped")

// treePSS sums Pss of the processes in the trees rooted at roots (from
// /proc/*/stat parent pids), each process once, and returns it with the
// roots' own Pss.
func treePSS(roots []int) (tree, top int64) {
	for _, r := range roots {
		top += pssOf(r)
	}
	for _, pid := range treePids(roots...) {
		tree += pssOf(pid)
	}
	return tree, top
}

// treePids are the processes of the trees rooted at roots, each once.
func treePids(roots ...int) []int {
	children := map[int][]int{}
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		if ppid, ok := parentPid(pid); ok {
			children[ppid] = append(children[ppid], pid)
		}
	}
	seen := map[int]bool{}
	var out []int
	stack := slices.Clone(roots)
	for len(stack) > 0 {
		pid := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[pid] {
			continue
		}
		seen[pid] = true
		out = append(out, pid)
		stack = append(stack, children[pid]...)
	}
	return out
}

func parentPid(pid int) (int, bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 2 {
		return 0, false
	}
	ppid, err := strconv.Atoi(f[1])
	return ppid, err == nil
}

// pssOf is a process's proportional set size in bytes (0 when gone).
func pssOf(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "Pss:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}
