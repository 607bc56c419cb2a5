package sandbox

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestWaitExit: waitExit returns once its process exits, not before,
// leaves it to Wait to reap, and holds no thread while it waits (a
// goroutine in waitid(2) holds one, and a P of the runtime with it).
func TestWaitExit(t *testing.T) {
	const n = 16
	before := threads(t)
	var cmds []*exec.Cmd
	var stdins []*os.File
	done := make(chan int, n)
	for i := range n {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("cat")
		cmd.Stdin = r
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		r.Close()
		cmds, stdins = append(cmds, cmd), append(stdins, w)
		go func() { waitExit(cmd.Process); done <- i }()
	}
	t.Cleanup(func() {
		for i, cmd := range cmds {
			stdins[i].Close()
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	select {
	case i := <-done:
		t.Fatalf("waitExit of process %d returned while it runs", i)
	case <-time.After(100 * time.Millisecond):
	}
	if grown := threads(t) - before; grown >= n/2 {
		t.Errorf("%d threads more while %d processes are waited for: the waits hold threads", grown, n)
	}
	for i, w := range stdins {
		w.Close() // cat exits
		select {
		case j := <-done:
			if j != i {
				t.Fatalf("waitExit of process %d returned when process %d exited", j, i)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("waitExit of process %d did not return 10s after it exited", i)
		}
		if err := cmds[i].Wait(); err != nil || !cmds[i].ProcessState.Exited() {
			t.Fatalf("process %d: Wait after waitExit: %v (%v)", i, err, cmds[i].ProcessState)
		}
	}
}

// threads is how many threads this process has.
func threads(t testing.TB) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Threads:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no Threads: line in /proc/self/status")
	return 0
}
