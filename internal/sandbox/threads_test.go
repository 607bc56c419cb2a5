package sandbox

import (
	"context"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/session"
)

// idleSupervisorThreads bounds the OS threads of an idle supervisor: the
// five it keeps for good (the spawner's, os/signal's two, sysmon, the
// runtime's template thread), sbinit's six spares, the one that runs its
// single P, and two the runtime may have made for system calls of init's
// start (12 here). It had 16-19 when there were 12 spares and each waiting
// command held a thread of its own.
const idleSupervisorThreads = 14

// TestSupervisorUnderFullPidsLimit holds 16 commands waiting, fills the
// pids limit (threads count against it, and a Go runtime that cannot make
// a thread it needs dies), then asks the supervisor for files, a command it
// cannot fork and a session's builtin, and checks that it answers all and
// serves again once the limit is free. The supervisor lives on the threads
// it has: a waiting command holds none of them (session's pollFor), and
// its idle thread count stays within idleSupervisorThreads.
func TestSupervisorUnderFullPidsLimit(t *testing.T) {
	rt := testRuntime(t)
	sb := create(t, rt, Config{HostBase: true, Limits: Limits{Pids: 64}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := sb.OpenSession(ctx, "s", SessionOptions{}); err != nil {
		t.Fatal(err)
	}
	mustSession(t, sb, "true")
	idle := supervisorThreads(t, sb)
	if idle > idleSupervisorThreads {
		t.Errorf("an idle supervisor has %d threads, more than %d", idle, idleSupervisorThreads)
	}

	const waiting = 16
	var wg sync.WaitGroup
	for range waiting {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sb.Exec(ctx, session.ExecRequest{Command: "exec sleep 1000", Timeout: time.Minute}) // killed below
		}()
	}
	awaitSleeps(t, sb, waiting)
	during := supervisorThreads(t, sb)
	t.Logf("supervisor threads: %d idle, %d with %d commands waiting", idle, during, waiting)
	if during > idle+2 {
		t.Errorf("%d waiting commands took the supervisor from %d to %d threads", waiting, idle, during)
	}

	full := make(chan struct{})
	var once sync.Once
	wg.Add(1)
	go func() {
		defer wg.Done()
		// bash says "fork: retry" at the first fork the limit refuses,
		// then waits seconds before each retry: the limit stays full.
		sb.ExecStream(ctx, session.ExecRequest{Command: "for i in {1..200}; do sleep 1000 & done", Timeout: time.Minute},
			func(_ bool, p []byte) {
				if strings.Contains(string(p), "fork: retry") { // on stdout: the output is merged
					once.Do(func() { close(full) })
				}
			})
	}()
	select {
	case <-full:
	case <-ctx.Done():
		t.Fatal("the pids limit of 64 never refused a fork")
	}

	var asked sync.WaitGroup
	for range 8 {
		asked.Add(3)
		go func() {
			defer asked.Done()
			if _, err := sb.ReadFile(ctx, "/etc/hostname", 1<<10); err != nil {
				t.Errorf("reading a file with the pids limit full: %v", err)
			}
		}()
		go func() {
			defer asked.Done()
			sb.Exec(ctx, session.ExecRequest{Command: "true", Timeout: 10 * time.Second}) // may not fork: any answer will do
		}()
		go func() {
			defer asked.Done()
			if _, err := sb.ListDir(ctx, "/etc"); err != nil {
				t.Errorf("listing a directory with the pids limit full: %v", err)
			}
		}()
	}
	asked.Wait()
	t.Logf("supervisor threads with the pids limit full, after 24 requests: %d", supervisorThreads(t, sb))
	if out := mustSession(t, sb, "echo full"); out != "full\n" {
		t.Errorf("a session's builtin with the pids limit full: %q", out)
	}
	// A builtin's kill: everything of the agent's, the session's shell too.
	sb.SessionExec(ctx, "s", session.ExecRequest{Command: "kill -KILL -1", Timeout: 10 * time.Second})
	wg.Wait()
	if !sb.Alive() {
		t.Fatal("the supervisor died while the pids limit was full")
	}
	mustOK(t, sb, "echo alive")
}

func mustSession(t *testing.T, sb *Sandbox, cmd string) string {
	t.Helper()
	res, err := sb.SessionExec(context.Background(), "s", session.ExecRequest{Command: cmd, Timeout: 30 * time.Second})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("session %q: %+v, %v", cmd, res, err)
	}
	return res.Output
}

// supervisorThreads is the number of the supervisor's OS threads.
func supervisorThreads(t *testing.T, sb *Sandbox) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/" + strconv.Itoa(sb.InitPid()) + "/task")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// awaitSleeps waits until n processes named sleep are children of the
// supervisor (each a command's exec'd shell).
func awaitSleeps(t *testing.T, sb *Sandbox, n int) {
	t.Helper()
	for i := 0; ; i++ {
		if sleepChildren(t, sb) >= n {
			return
		}
		if i == 6000 {
			t.Fatalf("%d commands never all started their sleep (%d did)", n, sleepChildren(t, sb))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func sleepChildren(t *testing.T, sb *Sandbox) int {
	t.Helper()
	base := "/proc/" + strconv.Itoa(sb.InitPid()) + "/task/"
	tasks, err := os.ReadDir(base)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, task := range tasks {
		b, _ := os.ReadFile(base + task.Name() + "/children")
		for _, pid := range strings.Fields(string(b)) {
			if comm, _ := os.ReadFile("/proc/" + pid + "/comm"); strings.TrimSpace(string(comm)) == "sleep" {
				n++
			}
		}
	}
	return n
}
