package cgroup

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/minisandbox/msb/internal/privtest"
)

// TestStartInside starts processes through StartInside, several at once,
// each into a group of its own: every process is born in its group's
// every hierarchy (no Add), no thread of this process is left in any
// group, and the groups, once their process is gone, are removed.
func TestStartInside(t *testing.T) {
	privtest.RequireRoot(t)
	info := Detect(os.Getenv("MSB_CGROUP_PARENT"))
	if info.Version != V1 {
		privtest.Skip(t, "not cgroup v1 (%s%s): StartInside is for v1", info.Version, info.Reason)
	}
	if err := PrepareParents(info); err != nil {
		t.Fatal(err)
	}
	const n = 4
	groups := make([]*Group, n)
	cmds := make([]*exec.Cmd, n)
	for i := range groups {
		g, err := Create(info, "test-"+t.Name()+"-"+strconv.Itoa(i), Limits{MemoryBytes: 64 << 20, Pids: 16})
		if err != nil {
			t.Fatal(err)
		}
		defer g.Destroy()
		groups[i] = g
		cmds[i] = exec.Command("sleep", "100")
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	inside := make([]bool, n)
	for i := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			inside[i], errs[i] = groups[i].StartInside(cmds[i].Start)
		}()
	}
	wg.Wait()
	for i, g := range groups {
		if errs[i] != nil || !inside[i] {
			t.Fatalf("group %d: inside %v, %v", i, inside[i], errs[i])
		}
		for c, dir := range g.dirs {
			if got := readTasks(t, dir); !slices.Equal(got, []string{strconv.Itoa(cmds[i].Process.Pid)}) {
				t.Errorf("%s: tasks %v, want only the started process %d (this process is %d)", dir, got, cmds[i].Process.Pid, os.Getpid())
			}
			if own := procCgroup(t, cmds[i].Process.Pid, c); filepath.Join(Root, c, own) != dir {
				t.Errorf("process %d is in %s %s, want %s", cmds[i].Process.Pid, c, own, dir)
			}
		}
	}
	for _, g := range groups {
		if err := g.Destroy(); err != nil {
			t.Fatalf("removing a group its process was started in: %v", err)
		}
	}
	for _, c := range cmds {
		c.Wait()
	}
}

// readTasks lists the thread ids in dir's tasks file.
func readTasks(t *testing.T, dir string) []string {
	b, err := os.ReadFile(filepath.Join(dir, "tasks"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(b))
}

// procCgroup is pid's cgroup in controller c's hierarchy.
func procCgroup(t *testing.T, pid int, c string) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) == 3 && slices.Contains(strings.Split(parts[1], ","), c) {
			return parts[2]
		}
	}
	t.Fatalf("no %s cgroup for %d in %q", c, pid, b)
	return ""
}
