package sandbox

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/session"
)

// anonKB is a process's anonymous resident memory in kB, from
// smaps_rollup: the supervisor's heap, stacks and runtime structures (its
// binary's text is shared by every sandbox). It is the larger of two
// reads: the kernel's rollup gives up the process's mmap lock when a
// writer waits for it and goes on from where it was, and a read while the
// runtime mapped memory came out at 188 kB, a seventh of the supervisor,
// in TestCgroupV2's VM (Linux 6.1). A walk can miss mappings, never count
// one twice.
func anonKB(t *testing.T, pid int) int {
	return max(smapsKB(t, pid, "Anonymous:"), smapsKB(t, pid, "Anonymous:"))
}

// smapsKB is the field key of pid's smaps_rollup, in kB.
func smapsKB(t *testing.T, pid int, key string) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		t.Fatalf("reading the supervisor's memory: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == key {
			kb, err := strconv.Atoi(f[1])
			if err != nil {
				t.Fatalf("smaps_rollup line %q: %v", line, err)
			}
			return kb
		}
	}
	t.Fatalf("no %s line in smaps_rollup:\n%s", key, b)
	return 0
}

// hugeMaps is the mappings of pid that hold transparent huge pages, one a
// line (address range, name, AnonHugePages), for a failure's message.
func hugeMaps(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		return err.Error()
	}
	var out []string
	head := ""
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 5 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":"):
			head = line
		case len(f) >= 2 && f[0] == "AnonHugePages:" && f[1] != "0":
			out = append(out, head+" huge "+f[1]+" kB")
		}
	}
	return strings.Join(out, "\n")
}

// withAnsweredSession is a sandbox whose session "s" has answered `true`:
// an idle task's state, as the bench's PSS measure holds it.
func withAnsweredSession(t *testing.T, rt *Runtime) *Sandbox {
	t.Helper()
	sb := create(t, rt, Config{HostBase: true})
	ctx := context.Background()
	if err := sb.OpenSession(ctx, "s", SessionOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.SessionExec(ctx, "s", session.ExecRequest{Command: "true"}); err != nil {
		t.Fatal(err)
	}
	return sb
}

// testIdleSupervisorFlat holds a sandbox whose session has answered and
// checks that its supervisor allocates nothing while nothing is asked of
// it: a supervisor that polled (it used to scan /proc every second for
// orphans) grew by ~13 kB a second until its first collection at 4 MB.
// Nor may the trim's check, a second after the last request, cost memory
// when a small command is all there was: when it asked the runtime
// (runtime.ReadMemStats) how much the heap had allocated, every supervisor
// grew by 0.25-0.4 MiB there, and when it went by the resident memory, a
// trim ran in TestCgroupV2's VM and left the supervisor 0.3 MiB larger.
// Nor may the kernel's khugepaged make a huge page of its heap where THP is
// "always" (it grew by 2 MiB in TestCgroupV2's VM before the supervisor
// turned THP off for its heap).
func testIdleSupervisorFlat(t *testing.T, rt *Runtime) {
	sb := withAnsweredSession(t, rt)
	// The supervisor's runtime settings (sbinit.RuntimeEnv) are its own.
	if env := mustOK(t, sb, "env"); strings.Contains(env, "GOMAXPROCS") || strings.Contains(env, "GODEBUG") || strings.Contains(env, "MSB_SANDBOX") {
		t.Fatalf("a command's environment has the supervisor's settings:\n%s", env)
	}
	answered := anonKB(t, sb.InitPid())
	time.Sleep(2 * time.Second) // past the trim's delay: what runs after a request has run
	before := anonKB(t, sb.InitPid())
	if before > answered+64 {
		t.Fatalf("the supervisor grew from %d to %d kB (%d kB in huge pages) in the second after a small command (the trim's check)\n%s",
			answered, before, smapsKB(t, sb.InitPid(), "AnonHugePages:"), hugeMaps(sb.InitPid()))
	}
	time.Sleep(3 * time.Second)
	if after := anonKB(t, sb.InitPid()); after > before+16 {
		t.Fatalf("an idle supervisor grew from %d to %d kB (%d kB in huge pages) in 3 s\n%s",
			before, after, smapsKB(t, sb.InitPid(), "AnonHugePages:"), hugeMaps(sb.InitPid()))
	}
}

// testSupervisorTrims runs a command with 4 MB of output (1 MiB kept) and
// checks that the idle supervisor gives back most of the heap that took:
// Go keeps freed heap mapped, and before the trim the supervisor stayed
// 7-9 MiB above where it started for minutes; with it, ~2.5 MiB (the
// runtime's structures for the larger heap stay). Then the same for a
// command whose 900 kB of output stay under the cap: it allocated ~5 MB,
// and while the trim counted each byte on the socket once it was not due.
func testSupervisorTrims(t *testing.T, rt *Runtime) {
	sb := withAnsweredSession(t, rt)
	ctx := context.Background()
	base := anonKB(t, sb.InitPid())
	res, err := sb.SessionExec(ctx, "s", session.ExecRequest{Command: "head -c 3000000 /dev/urandom | base64"})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Truncated {
		t.Fatalf("the output (%d bytes) was meant to exceed the cap", len(res.Output))
	}
	waitTrimmed(t, sb, base, "4 MB of output")
	res, err = sb.SessionExec(ctx, "s", session.ExecRequest{Command: "head -c 900000 /dev/zero | tr '\\0' x"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Truncated || len(res.Output) != 900000 {
		t.Fatalf("the output (%d bytes, truncated %v) was meant to be 900000 bytes, whole", len(res.Output), res.Truncated)
	}
	waitTrimmed(t, sb, base, "900 kB of output")
}

// waitTrimmed waits up to 15 s for the idle supervisor of sb to be back
// within 4 MiB of base kB after a command with what.
func waitTrimmed(t *testing.T, sb *Sandbox, base int, what string) {
	t.Helper()
	peak := anonKB(t, sb.InitPid())
	const slack = 4 << 10 // kB
	deadline := time.Now().Add(15 * time.Second)
	for {
		now := anonKB(t, sb.InitPid())
		if now <= base+slack {
			t.Logf("supervisor: %d kB before the commands, %d kB right after one with %s, %d kB once idle", base, peak, what, now)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after a command with %s the idle supervisor kept %d kB (%d before the commands, %d right after it; %d kB in huge pages): its free heap was not given back\n%s",
				what, now, base, peak, smapsKB(t, sb.InitPid(), "AnonHugePages:"), hugeMaps(sb.InitPid()))
		}
		time.Sleep(200 * time.Millisecond)
	}
}
