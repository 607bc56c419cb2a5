package sandbox

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/session"
	"golang.org/x/sys/unix"
)

// testCloseThenRuntimeClose: Close returns with the sandbox's processes
// gone (init itself may still be exiting); the rest of its cleanup, init's
// exit first, ends by the time Runtime.Close returns, leaving nothing
// (testRuntime checks the state dir and cgroups), and its phases are all
// timed.
func testCloseThenRuntimeClose(t *testing.T, _ *Runtime) {
	rt := testRuntime(t)
	sb := create(t, rt, Config{HostBase: true})
	mustOK(t, sb, "echo x > /written")
	marker := "msb-close-marker-" + strconv.Itoa(os.Getpid())
	// A session's background job, and one that left the session's process
	// tree, group and environment (closing the session does not find it):
	// both live until Close.
	ctx := context.Background()
	if err := sb.OpenSession(ctx, "bg", SessionOptions{}); err != nil {
		t.Fatal(err)
	}
	job := "(exec -a " + marker + " sleep 1000) </dev/null >/dev/null 2>&1 & (setsid env -i /bin/bash -c 'exec -a " + marker + " sleep 1000' </dev/null >/dev/null 2>&1 &)"
	if _, err := sb.SessionExec(ctx, "bg", session.ExecRequest{Command: job}); err != nil {
		t.Fatal(err)
	}
	var pids []int
	for deadline := time.Now().Add(5 * time.Second); len(pids) != 2; time.Sleep(20 * time.Millisecond) {
		if pids = findCmdline(t, marker); time.Now().After(deadline) {
			t.Fatalf("%d processes named %s before Close, want 2", len(pids), marker)
		}
	}
	// Their pidfds, polled at once after Close: exited, not merely about
	// to be killed by init's exit.
	var fds []unix.PollFd
	for _, p := range pids {
		fd, err := unix.PidfdOpen(p, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		fds = append(fds, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
	}
	pid, dir := sb.InitPid(), sb.dir
	if err := sb.Close(); err != nil {
		t.Fatal(err)
	}
	if n, err := unix.Poll(fds, 0); err != nil || n != len(fds) {
		t.Fatalf("%d of the sandbox's %d processes had exited when Close returned (%v)", n, len(fds), err)
	}
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err == nil {
		t.Fatalf("init %d still exists after Runtime.Close", pid)
	}
	select {
	case <-sb.Cleaned():
	default:
		t.Fatal("Runtime.Close returned before the sandbox's cleanup ended")
	}
	if err := sb.CleanupErr(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Fatalf("state dir %s left after Runtime.Close", dir)
	}
	want := []string{PhaseDirs, PhaseConfig, PhaseSpawn, PhaseInitRun, PhaseMounts, PhaseWaitStart, PhaseInitCaps,
		PhaseSupHarden, PhaseSupReady, PhaseCreate, PhaseShutdown, PhaseRelease, PhaseClose, PhaseMountsRm, PhaseStateRm, PhaseCleanup}
	if rt.syncDisk {
		want = append(want, PhaseReap) // the disk is deleted on Close's path, after init's exit
	} else {
		want = append(want, PhaseExit)
	}
	if rt.disk().kind != diskHost {
		want = append(want, PhaseDisk)
	}
	if rt.disk().kind == diskPool {
		want = append(want, PhaseVolume)
	}
	if rt.cg.Usable() {
		want = append(want, PhaseCgroup, PhaseCgroupRm)
		if !rt.cloneInto && !rt.forkInside { // else init is born in its group (see InitBornInCgroup)
			want = append(want, PhaseAttach)
		}
	}
	t.Logf("phases: %v", sb.Timings())
	got := map[string]time.Duration{}
	for _, p := range sb.Timings() {
		if _, dup := got[p.Name]; dup || p.Duration < 0 {
			t.Errorf("phase %s twice or negative: %v", p.Name, sb.Timings())
		}
		got[p.Name] = p.Duration
	}
	for _, w := range want {
		if _, ok := got[w]; !ok {
			t.Errorf("phase %s not timed: %v", w, sb.Timings())
		}
	}
	if got[PhaseReap] > got[PhaseClose] || got[PhaseMounts] > got[PhaseCreate] || got[PhaseExit] > got[PhaseCleanup] {
		t.Errorf("a phase is longer than its whole: %v", sb.Timings())
	}
}

// Environment of the helper process testKilledDuringCleanup starts.
const (
	envHelper      = "MSB_TEST_HELPER"
	helperDieClean = "die-in-cleanup"
	envHelperState = "MSB_TEST_HELPER_STATE"
	envHelperStep  = "MSB_TEST_HELPER_STEP"
	envHelperDisk  = "MSB_TEST_HELPER_DISK"
)

// helperReport is what the helper says once its cleanup stopped.
type helperReport struct {
	ID      string   `json:"id"`
	Dir     string   `json:"dir"`
	Cgroups []string `json:"cgroups"`
	Step    string   `json:"step"`
}

// dieInCleanup is the helper: it closes a sandbox, stops the cleanup after
// Close at the step $MSB_TEST_HELPER_STEP, says so and waits to be killed.
// The stopped cleanup sleeps: were it in select {} too, the runtime would
// find every goroutine blocked and exit on "deadlock", on the test's stderr.
func dieInCleanup() error {
	rt, err := NewRuntime(RuntimeOptions{StateDir: os.Getenv(envHelperState), DiskDir: os.Getenv(envHelperDisk)})
	if err != nil {
		return err
	}
	sb, err := rt.Create(context.Background(), Config{HostBase: true})
	if err != nil {
		return err
	}
	rep := helperReport{ID: sb.ID, Dir: sb.dir}
	if sb.cg != nil {
		rep.Cgroups = sb.cg.Dirs()
	}
	testHookCleanup = func(step string) {
		if step == os.Getenv(envHelperStep) {
			rep.Step = step
			json.NewEncoder(os.Stdout).Encode(rep)
			time.Sleep(time.Hour)
		}
	}
	if err := sb.Close(); err != nil {
		return err
	}
	select {}
}

// testKilledDuringCleanup: an msb killed while a closed sandbox's cleanup
// runs in the background leaves only what GC removes.
func testKilledDuringCleanup(t *testing.T, _ *Runtime) {
	for _, step := range []string{"begin", "volume"} {
		t.Run(step, func(t *testing.T) {
			rt := testRuntime(t)
			cmd := exec.Command("/proc/self/exe", "-test.run=^$")
			cmd.Env = append(os.Environ(), envHelper+"="+helperDieClean, envHelperState+"="+rt.StateDir(), envHelperStep+"="+step, envHelperDisk+"="+testDiskDir)
			cmd.Stderr = os.Stderr
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			line, err := bufio.NewReader(out).ReadBytes('\n')
			cmd.Process.Kill()
			cmd.Wait()
			var rep helperReport
			if err != nil || json.Unmarshal(line, &rep) != nil || rep.Step != step {
				t.Fatalf("helper said %q (%v)", line, err)
			}
			if _, err := os.Stat(rep.Dir); err != nil {
				t.Fatalf("the killed msb's state dir is gone already (%v): nothing left to test", err)
			}
			gc := rt.GC()
			if len(gc.Sandboxes) != 1 || gc.Sandboxes[0] != rep.Dir || len(gc.Errors) > 0 {
				t.Fatalf("gc report %+v, want the state dir %s", gc, rep.Dir)
			}
			for _, d := range rep.Cgroups {
				if _, err := os.Stat(d); err == nil {
					t.Errorf("cgroup %s left after gc", d)
				}
			}
			// The volume of a sandbox whose cleanup had not deleted it
			// yet: GC reclaims it, and the pool stays for the next.
			var want []string
			if step == "begin" && rt.disk().kind == diskPool {
				want = []string{rep.ID}
			}
			if !slices.Equal(gc.Volumes, want) {
				t.Errorf("gc reclaimed volumes %v, want %v", gc.Volumes, want)
			}
			// Its volume is gone from the pool. Only its own: the pool is
			// the whole test binary's, and the suite's runtime may still
			// be removing, in the background, the volumes of sandboxes
			// that earlier cases closed (GCPidReused's, under load):
			// volumes of a live owner, which GC rightly leaves.
			if rt.disk().kind == diskPool {
				if names, err := rt.disk().pool.Volumes(); err != nil || slices.Contains(names, rep.ID) {
					t.Errorf("the pool holds %v after gc (%v), want no %s", names, err, rep.ID)
				}
			}
		})
	}
}

// testDiskAdmittedClose: with RuntimeOptions.DiskAdmitted, the sandbox's
// volume is gone when Close returns (its disk reservation may be given
// back then), not later in the background.
func testDiskAdmittedClose(t *testing.T, _ *Runtime) {
	rt := testRuntime(t)
	rt.syncDisk = true
	if rt.disk().kind != diskPool {
		t.Skipf("no disk pool in %s mode: no volume to remove", rt.Mode())
	}
	sb := create(t, rt, Config{HostBase: true})
	mustOK(t, sb, "head -c 1M /dev/zero > /written")
	if err := sb.Close(); err != nil {
		t.Fatal(err)
	}
	var volume bool
	for _, p := range sb.Timings() {
		volume = volume || p.Name == PhaseVolume
	}
	if !volume {
		t.Fatalf("Close returned before removing the volume: %v", sb.Timings())
	}
}

// testUpperHoldsOnlyWrites: the mount points of a host-base root are in
// the runtime's lower dir (makeMountPoints), so a caller's upper dir holds
// only what the sandbox wrote, and nothing the caller removes is a former
// mount point.
func testUpperHoldsOnlyWrites(t *testing.T, rt *Runtime) {
	upper := t.TempDir()
	sb := create(t, rt, Config{HostBase: true, UpperDir: upper})
	mustOK(t, sb, "echo x > /written && ls /usr/bin/env /proc/self /dev/null /tmp >/dev/null")
	if err := sb.Close(); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(upper)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != "written" {
		t.Fatalf("upper dir holds %v, want only the file written", names)
	}
}

// findCmdline returns the host's processes whose command line starts with
// name.
func findCmdline(t *testing.T, name string) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil && strings.HasPrefix(string(b), name+"\x00") {
			pids = append(pids, pid)
		}
	}
	return pids
}
