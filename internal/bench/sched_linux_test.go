package bench

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/minisandbox/msb/internal/privtest"
)

const roundRobinHelperEnv = "MSB_TEST_ROUND_ROBIN_HELPER"

// TestRoundRobin runs the test binary as a program started under
// SCHED_FIFO (as `chrt -f 10 msb-bench` is) that calls RoundRobin, and
// checks that what goes on (every thread of the re-executed process and
// a process it starts) is SCHED_RR at the same priority, and that a
// program under the default policy is left alone.
func TestRoundRobin(t *testing.T) {
	privtest.RequireRoot(t) // SCHED_FIFO needs CAP_SYS_NICE
	for _, c := range []struct {
		fifo bool
		want string
	}{{true, "policy 2 prio 10"}, {false, "policy 0 prio 0"}} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestRoundRobinHelper$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), roundRobinHelperEnv+"="+strconv.FormatBool(c.fifo))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("fifo %v: helper: %v\n%s", c.fifo, err, out)
		}
		var got []string
		for _, l := range strings.Split(string(out), "\n") {
			if s, ok := strings.CutPrefix(l, "sched: "); ok {
				got = append(got, s)
			}
		}
		if len(got) < 3 { // the main thread, at least one other, the child
			t.Fatalf("fifo %v: %d sched lines, want ≥ 3:\n%s", c.fifo, len(got), out)
		}
		for _, g := range got {
			if !strings.HasSuffix(g, c.want) {
				t.Errorf("fifo %v: %s, want %s", c.fifo, g, c.want)
			}
		}
	}
}

// TestRoundRobinHelper is TestRoundRobin's program: first run (the
// environment says "true") it puts its thread under SCHED_FIFO 10 and
// calls RoundRobin, which re-executes it; then, or when the environment
// says "false", it reports the policy of each of its threads and of a
// child.
func TestRoundRobinHelper(t *testing.T) {
	mode := os.Getenv(roundRobinHelperEnv)
	if mode == "" {
		t.Skip("run by TestRoundRobin")
	}
	if mode == "true" {
		os.Setenv(roundRobinHelperEnv, "again") // the re-executed run reports
		runtime.LockOSThread()
		prio := int32(10)
		if _, _, errno := syscall.RawSyscall(unix.SYS_SCHED_SETSCHEDULER, 0, unix.SCHED_FIFO, uintptr(unsafe.Pointer(&prio))); errno != 0 {
			t.Fatalf("sched_setscheduler FIFO: %v", errno)
		}
		t.Fatalf("RoundRobin returned: %v", RoundRobin()) // it returns only on failure
	}
	if err := RoundRobin(); err != nil { // the re-executed run is not FIFO: nothing to do
		t.Fatal(err)
	}
	tasks, err := filepath.Glob("/proc/self/task/*/stat")
	if err != nil || len(tasks) < 2 {
		t.Fatalf("threads: %v %v", tasks, err)
	}
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("sched: thread %s %s\n", filepath.Base(filepath.Dir(f)), policyOf(t, string(b)))
	}
	b, err := exec.Command("cat", "/proc/self/stat").Output()
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("sched: child %s\n", policyOf(t, string(b)))
}

// policyOf is a /proc/PID/stat's scheduling policy and real-time
// priority (fields 41 and 40).
func policyOf(t *testing.T, stat string) string {
	i := strings.LastIndexByte(stat, ')')
	f := strings.Fields(stat[i+1:]) // from field 3
	if len(f) < 39 {
		t.Fatalf("short stat: %q", stat)
	}
	return fmt.Sprintf("policy %s prio %s", f[38], f[37])
}
