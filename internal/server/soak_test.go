package server

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/client"
)

// SoakEnv sizes TestServerSoak: "SANDBOXESxCOMMANDSxRUNS", e.g. 200x1000x5
// for the load run docs/bench.md describes. Unset, the soak is small enough
// for make test.
const SoakEnv = "MSB_SOAK"

// soakSize is one soak's shape.
type soakSize struct{ sandboxes, commands, runs int }

func parseSoak(s string) (soakSize, error) {
	if s == "" {
		return soakSize{sandboxes: 12, commands: 40, runs: 1}, nil
	}
	var z soakSize
	parts := strings.Split(s, "x")
	if len(parts) != 3 {
		return z, fmt.Errorf("%s=%q: want SANDBOXESxCOMMANDSxRUNS", SoakEnv, s)
	}
	for i, p := range []*int{&z.sandboxes, &z.commands, &z.runs} {
		n, err := strconv.Atoi(parts[i])
		if err != nil || n <= 0 || n > 100000 {
			return z, fmt.Errorf("%s=%q: %q is not a count in 1..100000", SoakEnv, s, parts[i])
		}
		*p = n
	}
	return z, nil
}

// soakTally counts what went wrong in a soak run: a command whose answer
// never came (an error, an ended session) is lost; one whose output is not
// its own (another command's, another sandbox's, or garbled) is mixed.
type soakTally struct {
	ok, lost, mixed atomic.Int64
	mu              sync.Mutex
	first           []string // the first few failures, for the report
}

func (t *soakTally) fail(kind *atomic.Int64, format string, args ...any) {
	kind.Add(1)
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.first) < 10 {
		t.first = append(t.first, fmt.Sprintf(format, args...))
	}
}

// TestServerSoak drives sessions of many sandboxes at once through the
// API, each with a counter its shell keeps: every command's output must be
// its own sandbox's next count, with exit 0. Nothing may be lost or mixed.
// MSB_SOAK=200x1000x5 is the long run (docs/bench.md); the default is a
// small one. TestRootless runs it unprivileged too.
func TestServerSoak(t *testing.T) {
	size, err := parseSoak(os.Getenv(SoakEnv))
	if err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, nil, nil)
	for run := 1; run <= size.runs; run++ {
		start := time.Now()
		tally := soakRun(t, d.unix, size)
		n := tally.ok.Load() + tally.lost.Load() + tally.mixed.Load()
		t.Logf("soak run %d/%d: %d sandboxes x %d commands: %d ok, %d lost, %d mixed, %.0f commands/s",
			run, size.runs, size.sandboxes, size.commands, tally.ok.Load(), tally.lost.Load(), tally.mixed.Load(),
			float64(n)/time.Since(start).Seconds())
		if tally.lost.Load()+tally.mixed.Load() > 0 {
			t.Fatalf("soak run %d: %d lost, %d mixed; first failures:\n%s", run, tally.lost.Load(), tally.mixed.Load(),
				strings.Join(tally.first, "\n"))
		}
	}
}

// soakRun creates size.sandboxes sandboxes with a session each, runs
// size.commands commands in every session at once, and closes them.
func soakRun(t *testing.T, c *client.Client, size soakSize) *soakTally {
	t.Helper()
	ctx := context.Background()
	ids := make([]string, size.sandboxes)
	var wg sync.WaitGroup
	errs := make(chan error, size.sandboxes)
	sem := make(chan struct{}, 8) // creations at once
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			info, err := c.CreateSandbox(ctx, api.CreateSandboxRequest{HostBase: true,
				Limits: api.Limits{MemoryBytes: 64 << 20}, AdmissionWaitNs: int64(time.Minute)})
			if err == nil {
				ids[i] = info.ID
				err = c.OpenSession(ctx, info.ID, api.SessionRequest{Name: "soak", Env: []string{"SB=" + info.ID}})
			}
			if err != nil {
				errs <- fmt.Errorf("sandbox %d: %w", i, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	t.Cleanup(func() {
		for _, id := range ids {
			if id != "" {
				c.DeleteSandbox(context.Background(), id)
			}
		}
	})
	for err := range errs {
		t.Fatal(err)
	}
	tally := &soakTally{}
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			soakSession(ctx, c, id, size.commands, tally)
		}()
	}
	wg.Wait()
	for _, id := range ids {
		if _, err := c.DeleteSandbox(ctx, id); err != nil {
			t.Errorf("closing %s: %v", id, err)
		}
	}
	return tally
}

// soakSession runs n counting commands in sandbox id's session.
func soakSession(ctx context.Context, c *client.Client, id string, n int, tally *soakTally) {
	for i := 1; i <= n; i++ {
		res, err := c.Exec(ctx, id, api.ExecRequest{Session: "soak", Command: `n=$((n+1)); echo "$SB $n"`})
		want := fmt.Sprintf("%s %d\n", id, i)
		switch {
		case err != nil:
			tally.fail(&tally.lost, "%s command %d: %v", id, i, err)
			return // the session's count is off from here on
		case res.ExitCode != 0 || res.Stdout != want:
			tally.fail(&tally.mixed, "%s command %d: exit %d, output %q, want %q", id, i, res.ExitCode, res.Stdout, want)
			return
		default:
			tally.ok.Add(1)
		}
	}
}
