package e2b

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/minisandbox/msb/internal/engine"
	"github.com/minisandbox/msb/internal/privtest"
	"github.com/minisandbox/msb/internal/server/e2b/envd/process"
	"github.com/minisandbox/msb/internal/server/e2b/envd/process/processconnect"
)

// TestE2BPauseStartsInFlight: processes whose start event was sent but
// whose commands are still on their way to the sandbox when a pause
// with processes comes (testHookRun holds each back 300 ms, as a loaded
// daemon might) are carried across the pause: the pause waits for them
// to reach the sandbox before the dump, so the resumed sandbox runs
// them all on and the process API lists them, none ended with its end
// lost. Before that wait, every such process was lost. A process
// started while the pause is taken waits for it, then fails as its
// sandbox was paused (or, sent before the pause began, is carried).
func TestE2BPauseStartsInFlight(t *testing.T) {
	privtest.RequireRoot(t)
	requireCriu(t)
	var front *Front
	url, _ := startFrontWith(t, func(_ *engine.Engine, f *Front) { front = f })
	testHookRun = func() { time.Sleep(300 * time.Millisecond) }
	t.Cleanup(func() { testHookRun = func() {} })
	pc := processconnect.NewProcessClient(http.DefaultClient, url)
	ctx := context.Background()
	for try := range 6 {
		c := createSandbox(t, url)
		var pids []uint32
		for range 4 {
			// Not bash -l -c: no primed shell, each in a shell of its own
			// (f.run); one process that starts none (criu cannot seize a
			// task frozen while it spawns: the dump fails, see below).
			cfg := &process.ProcessConfig{Cmd: "/bin/sleep", Args: []string{"1000"}}
			s, err := pc.Start(ctx, req(c, &process.StartRequest{Process: cfg}))
			if err != nil {
				t.Fatal(err)
			}
			if !s.Receive() || s.Msg().GetEvent().GetStart() == nil {
				t.Fatalf("no start event: %v", s.Err())
			}
			pids = append(pids, s.Msg().GetEvent().GetStart().GetPid())
			s.Close()
		}
		// One more, sent while the pause is taken (it waits 300 ms for
		// the four): it waits for the pause and fails as the sandbox
		// was paused, or, sent before the pause began, is carried.
		late := make(chan uint32, 1)
		go func() {
			time.Sleep(100 * time.Millisecond)
			cfg := &process.ProcessConfig{Cmd: "/bin/sleep", Args: []string{"1000"}}
			s, err := pc.Start(ctx, req(c, &process.StartRequest{Process: cfg}))
			if err == nil && s.Receive() {
				late <- s.Msg().GetEvent().GetStart().GetPid()
				s.Close()
				return
			}
			if err == nil {
				err = s.Err()
			}
			if connect.CodeOf(err) != connect.CodeUnavailable || !strings.Contains(err.Error(), "paused") {
				t.Errorf("a start during the pause: %v; want unavailable, the sandbox was paused", err)
			}
			late <- 0
		}()
		key := map[string]string{"X-API-Key": testKey}
		status, body := call(t, "POST", url+"/sandboxes/"+c.id+"/pause", key)
		if pid := <-late; pid != 0 {
			t.Logf("the start meant for the pause came before it: pid %d", pid)
			pids = append(pids, pid)
		} else {
			t.Logf("the start during the pause waited for it and failed: the sandbox was paused")
		}
		for again := 0; again < 3 && status != http.StatusNoContent && strings.Contains(fmt.Sprint(body), "Unseizable"); again++ {
			// The engine's dump met a task it cannot seize (one frozen
			// while it spawned): the pause failed, and the sandbox runs
			// on with every process.
			t.Logf("try %d: the dump failed: %v", try, body)
			if got := listed(t, pc, c); !slices.Equal(got, pids) {
				t.Errorf("after a failed pause the process API lists %v; want %v", got, pids)
			}
			status, body = call(t, "POST", url+"/sandboxes/"+c.id+"/pause", key)
		}
		if status != http.StatusNoContent {
			t.Fatalf("pause: %d %v", status, body)
		}
		b := front.box(c.id)
		b.mu.Lock()
		kept := b.pause
		b.mu.Unlock()
		if kept != pauseProcesses {
			t.Logf("try %d: the pause kept %q", try, kept)
			continue
		}
		r, _ := http.NewRequest("POST", url+"/sandboxes/"+c.id+"/connect", strings.NewReader(`{"timeout": 60}`))
		r.Header.Set("X-API-Key", testKey)
		res, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusCreated {
			t.Fatalf("resume: %d", res.StatusCode)
		}
		b.mu.Lock()
		kept = b.pause
		b.mu.Unlock()
		if kept != pauseProcesses {
			t.Fatalf("the resume kept %q, not the processes", kept)
		}
		if listed := listed(t, pc, c); !slices.Equal(listed, pids) {
			t.Errorf("after the resume the process API lists %v; want %v, all started before the pause", listed, pids)
			for _, pid := range pids {
				b.mu.Lock()
				p := b.procs[pid]
				b.mu.Unlock()
				if p != nil {
					p.mu.Lock()
					if n := len(p.log); n > 0 {
						t.Logf("process %d: %v", pid, p.log[n-1].GetEnd())
					}
					p.mu.Unlock()
				}
			}
		}
		return
	}
	t.Fatal("no pause of 6 kept the processes")
}

// listed are the pids the process API lists in c, in order.
func listed(t *testing.T, pc processconnect.ProcessClient, c envdClient) []uint32 {
	t.Helper()
	list, err := pc.List(context.Background(), req(c, &process.ListRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	var pids []uint32
	for _, p := range list.Msg.GetProcesses() {
		pids = append(pids, p.GetPid())
	}
	slices.Sort(pids)
	return pids
}
