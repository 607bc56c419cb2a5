package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/client"
)

// MethodMSBAPI is msb through its daemon's API (msb serve, a child process
// of the benchmark, over its unix socket): a raw sandbox of the host's
// system dirs created with its session (the bare workload's task), the
// command run in that session, the sandbox deleted. The throughput
// measure only.
const MethodMSBAPI = "msb-api"

// apiMethod makes the bare workload's tasks through a daemon. Its close
// is the DELETE, which returns before the daemon's cleanup of the sandbox
// (mounts, disk volume, cgroups, state dir); a drain awaits those
// cleanups, and the throughput measure counts the drain in its slice.
type apiMethod struct {
	d *daemonProc
	c *client.Client
	// openSession opens the session with a request of its own after the
	// create, for a daemon whose create cannot open one.
	openSession bool

	mu      sync.Mutex
	deleted []string // sandboxes deleted and not yet seen drained
}

func (m *apiMethod) name() string { return MethodMSBAPI }

func (m *apiMethod) files(context.Context, int) ([]string, error) {
	return nil, errors.New("msb-api has no cold trial")
}

func (m *apiMethod) create(ctx context.Context, _ int) (liveTask, error) {
	req := api.CreateSandboxRequest{HostBase: true}
	if !m.openSession {
		req.Session = benchSession
	}
	info, err := m.c.CreateSandbox(ctx, req)
	if err != nil {
		return nil, err
	}
	if m.openSession {
		if err := m.c.OpenSession(ctx, info.ID, api.SessionRequest{Name: benchSession}); err != nil {
			m.c.DeleteSandbox(context.WithoutCancel(ctx), info.ID)
			return nil, err
		}
	}
	return &apiTask{m: m, id: info.ID}, nil
}

// drain waits until the daemon has cleaned up after every sandbox this
// method deleted: each one's state dir gone, the last step of a cleanup.
func (m *apiMethod) drain(ctx context.Context) error {
	m.mu.Lock()
	ids := m.deleted
	m.deleted = nil
	m.mu.Unlock()
	deadline := time.Now().Add(time.Minute)
	for _, id := range ids {
		for {
			_, err := os.Lstat(filepath.Join(m.d.state, id))
			if errors.Is(err, os.ErrNotExist) {
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return fmt.Errorf("the daemon did not clean up after sandbox %s within a minute: %v", id, errors.Join(err, ctx.Err()))
			}
			time.Sleep(200 * time.Microsecond)
		}
	}
	return nil
}

type apiTask struct {
	m  *apiMethod
	id string
}

func (t *apiTask) run(ctx context.Context, command string) error {
	res, err := t.m.c.Exec(ctx, t.id, api.ExecRequest{Session: benchSession, Command: command, TimeoutNs: int64(commandTimeout)})
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return exitError(res.ExitCode, res.Stdout+res.Stderr)
	}
	return nil
}

func (t *apiTask) close() error {
	_, err := t.m.c.DeleteSandbox(context.Background(), t.id)
	t.m.mu.Lock()
	t.m.deleted = append(t.m.deleted, t.id)
	t.m.mu.Unlock()
	return err
}

func (t *apiTask) pids() []int { return nil }

func (t *apiTask) dirs(context.Context) ([]string, error) {
	return nil, errors.New("msb-api's tasks are the daemon's")
}

// drainer is a method whose close leaves work to the background; drain
// awaits it, and what a measure times includes the drain.
type drainer interface {
	drain(ctx context.Context) error
}
