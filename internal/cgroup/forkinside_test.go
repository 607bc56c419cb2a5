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
	info := v1Info(t)
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

// TestStartInsideReadsHomeOnce: msb's cgroups are read once, not at
// every start.
func TestStartInsideReadsHomeOnce(t *testing.T) {
	info := v1Info(t)
	reads := countReads(t)
	g := testGroup(t, info, "")
	for range 3 {
		startSleep(t, g)
	}
	if *reads != 1 {
		t.Errorf("3 starts read msb's cgroups %d times, want once", *reads)
	}
}

// TestStartInsideAfterAMove: this process is moved to other cgroups, a
// start reads them, it is moved back and the other cgroups are removed:
// the next start's thread, failing to go back to them, reads the cgroups
// again and goes back where the process is, not to the roots.
func TestStartInsideAfterAMove(t *testing.T) {
	info := v1Info(t)
	reads := countReads(t)
	orig, err := readCgroups("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	away := testGroup(t, info, "away")
	g := testGroup(t, info, "")
	back := map[string]string{}
	for c := range away.dirs {
		back[c] = filepath.Join(Root, c, orig[c])
	}
	moveProcess(t, away.dirs)
	t.Cleanup(func() { moveProcess(t, back) }) // before the groups' Destroy
	startSleep(t, g)
	moveProcess(t, back)
	if err := away.Destroy(); err != nil {
		t.Fatal(err)
	}
	startSleep(t, g)
	if *reads != 2 {
		t.Errorf("msb's cgroups read %d times, want 2 (the first start, the failed move back)", *reads)
	}
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		tid, _ := strconv.Atoi(task.Name())
		for c := range g.dirs {
			if got := threadCgroup(t, tid, c); got != orig[c] {
				t.Errorf("thread %d is in %s %s, want %s, where the process is", tid, c, got, orig[c])
			}
		}
	}
}

// v1Info is the host's cgroups, with their parents made; the test skips
// (fails under MSB_TEST_STRICT) unless they are v1 and this is root.
func v1Info(t *testing.T) Info {
	t.Helper()
	privtest.RequireRoot(t)
	info := Detect(os.Getenv("MSB_CGROUP_PARENT"))
	if info.Version != V1 {
		privtest.Skip(t, "not cgroup v1 (%s%s): StartInside is for v1", info.Version, info.Reason)
	}
	if err := PrepareParents(info); err != nil {
		t.Fatal(err)
	}
	return info
}

// countReads gives the test a fresh home whose readings it counts.
func countReads(t *testing.T) *int {
	t.Helper()
	n := new(int)
	saved := home
	home = &homeGroups{read: func(file string) (map[string]string, error) {
		*n++
		return readCgroups(file)
	}}
	t.Cleanup(func() { home = saved })
	return n
}

// testGroup is a group of the test's, destroyed at its end.
func testGroup(t *testing.T, info Info, name string) *Group {
	t.Helper()
	g, err := Create(info, "test-"+t.Name()+name, Limits{MemoryBytes: 64 << 20, Pids: 16})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Destroy() })
	return g
}

// startSleep starts a sleep in g through StartInside, checks it started
// inside, and ends it.
func startSleep(t *testing.T, g *Group) {
	t.Helper()
	cmd := exec.Command("sleep", "100")
	inside, err := g.StartInside(cmd.Start)
	if err != nil || !inside {
		t.Fatalf("inside %v, %v", inside, err)
	}
	cmd.Process.Kill()
	cmd.Wait()
}

// moveProcess moves this process to dirs (controller -> cgroup dir).
func moveProcess(t *testing.T, dirs map[string]string) {
	t.Helper()
	for _, dir := range dirs {
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
			t.Fatal(err)
		}
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
	return cgroupIn(t, "/proc/"+strconv.Itoa(pid)+"/cgroup", c)
}

// threadCgroup is this process's thread tid's cgroup in controller c's
// hierarchy.
func threadCgroup(t *testing.T, tid int, c string) string {
	return cgroupIn(t, "/proc/self/task/"+strconv.Itoa(tid)+"/cgroup", c)
}

// cgroupIn is the cgroup in controller c's hierarchy that file names.
func cgroupIn(t *testing.T, file, c string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) == 3 && slices.Contains(strings.Split(parts[1], ","), c) {
			return parts[2]
		}
	}
	t.Fatalf("no %s cgroup in %s: %q", c, file, b)
	return ""
}
