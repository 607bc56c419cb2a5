package e2b

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/engine"
)

// A sandbox's lifecycle is what happens at its timeout, as the SDK's
// lifecycle option asks at create (autoPause, autoResume): killed (E2B's
// default), or paused as the SDK's pause does (pauseBox: the files kept,
// no memory: what E2B calls a filesystem snapshot). A paused sandbox with
// autoResume is resumed by the next envd call that names it, and then
// runs for the timeout it was created with, as on E2B.

// lifecycle is a sandbox's lifecycle; the zero value is E2B's default.
type lifecycle struct {
	AutoPause  bool `json:"autoPause,omitempty"`
	AutoResume bool `json:"autoResume,omitempty"`
	// Timeout is the one the sandbox was created with, which an
	// auto-resume gives it again (0: E2B's default).
	Timeout time.Duration `json:"timeout,omitempty"`
}

// lifecycleRequest is a create's lifecycle fields, as the SDK sends them.
type lifecycleRequest struct {
	AutoPause *bool `json:"autoPause"`
	// AutoPauseMemory false asks for a filesystem-only pause, which is
	// what msb's pause is anyway; true (E2B's default) cannot be met and
	// is taken as false.
	AutoPauseMemory *bool `json:"autoPauseMemory"`
	AutoResume      *struct {
		Enabled bool `json:"enabled"`
	} `json:"autoResume"`
}

// lifecycleOf checks a create's lifecycle fields as E2B's API does:
// autoResume needs autoPause, and an asked-for filesystem-only pause
// cannot be woken by traffic.
func lifecycleOf(req lifecycleRequest, timeout time.Duration) (lifecycle, error) {
	l := lifecycle{Timeout: timeout}
	if req.AutoPause != nil {
		l.AutoPause = *req.AutoPause
	}
	if req.AutoResume != nil {
		l.AutoResume = req.AutoResume.Enabled
	}
	if l.AutoResume && !l.AutoPause {
		return l, fmt.Errorf("%w: autoResume needs autoPause (on_timeout \"pause\")", engine.ErrBadRequest)
	}
	if l.AutoResume && req.AutoPauseMemory != nil && !*req.AutoPauseMemory {
		return l, fmt.Errorf("%w: autoResume cannot go with autoPauseMemory false: a filesystem-only snapshot is resumed by connect, not by traffic", engine.ErrBadRequest)
	}
	return l, nil
}

// info is l as get_info shows it (SandboxDetail.lifecycle).
func (l lifecycle) info() map[string]any {
	onTimeout := "kill"
	if l.AutoPause {
		onTimeout = "pause"
	}
	return map[string]any{"onTimeout": onTimeout, "autoResume": l.AutoResume}
}

// timedOut is what b's timer does at its end: pause b when its lifecycle
// says so, else kill it. A timer that fires after the end moved later
// (set_timeout, connect, a refresh raced it) does nothing.
func (f *Front) timedOut(b *box) {
	if !b.due() {
		return
	}
	if _, paused := b.engineID(); paused { // paused at the last shutdown (shutdown.go)
		f.shutdownPauseEnded(b)
		return
	}
	if !b.cycle.AutoPause {
		f.log.Info("e2b sandbox reached its timeout", "sandbox", b.id)
		f.close(b.id)
		return
	}
	f.autoPause(b)
}

// due reports whether b's end has come.
func (b *box) due() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return !time.Now().Before(b.end)
}

// autoPause pauses b at its timeout, unless a call that held b.life
// meanwhile moved its end later (connect), paused it or killed it. A
// pause that fails kills the sandbox, as a timeout without auto-pause
// would, and the daemon and b's logs say why.
func (f *Front) autoPause(b *box) {
	b.life.Lock()
	defer b.life.Unlock()
	if !b.due() {
		return
	}
	f.log.Info("e2b sandbox reached its timeout: pausing it (on_timeout pause)", "sandbox", b.id)
	err := f.pauseLocked(context.Background(), b, time.Time{})
	if err == nil || errors.Is(err, errAlreadyPaused) || engine.Kind(err) == api.CodeNotFound {
		return
	}
	f.log.Error("auto-pausing an e2b sandbox at its timeout failed: killing it", "sandbox", b.id, "err", err)
	b.logf("error", nil, "auto-pause at the timeout failed, the sandbox is killed: %v", err)
	f.close(b.id)
}

// routable is the box a sandbox-plane request for id goes to: a running
// sandbox, or a paused one with autoResume or paused by the daemon's
// shutdown (which wake resumes once the request is authenticated); nil:
// none.
func (f *Front) routable(id string) *box {
	b := f.live(id)
	if b == nil {
		return nil
	}
	if _, paused := b.engineID(); paused && !b.cycle.AutoResume && !b.pausedByShutdown() {
		return nil
	}
	return b
}

// pausedByShutdown says whether b is paused because a daemon stopped
// (shutdown.go), not because its client or its timeout asked.
func (b *box) pausedByShutdown() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.paused != "" && !b.shutdownAt.IsZero()
}

// wake resumes b if it is paused (autoResume: routable let it through),
// for the timeout it was created with; a running b is left as it is.
func (f *Front) wake(ctx context.Context, b *box) error {
	if _, paused := b.engineID(); !paused {
		return nil
	}
	timeout := b.cycle.Timeout
	if timeout <= 0 {
		timeout = defaultTimeout
	}
	resumed, err := f.resumeBox(ctx, b, timeout, false)
	if err != nil {
		return fmt.Errorf("auto-resuming sandbox %s: %w", b.id, err)
	}
	if resumed {
		b.logf("info", nil, "sandbox resumed by an envd request")
	}
	return nil
}

// notRunning is the 502 E2B's proxy answers for a sandbox that does not
// run, which the SDK raises as SandboxNotRunningException.
func notRunning(w http.ResponseWriter, id string) {
	writeJSON(w, http.StatusBadGateway, map[string]any{"code": http.StatusBadGateway, "sandboxId": id,
		"message": "The sandbox " + id + " was not found"})
}
