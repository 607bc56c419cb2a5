package e2b

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/engine"
)

// pausePrefix starts the names of the snapshots paused sandboxes resume
// from; list_snapshots leaves them out, as E2B does its pause snapshots.
const pausePrefix = "e2b-pause-"

// MaxFork is the most children one E2B fork asks for (the SDK's bound):
// more take several calls.
const MaxFork = 20

// e2bLabels mark the engine's sandboxes this front end made.
func e2bLabels() api.Map[string, string] { return api.Map[string, string]{"e2b": "1"} }

// decode reads an optional JSON body into v: an empty body leaves v as is,
// a bad one is engine.ErrBadRequest.
func decode(r *http.Request, v any) error {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("reading the body: %w", err)
	}
	if len(strings.TrimSpace(string(body))) == 0 {
		return nil
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("%w: decoding the body: %v", engine.ErrBadRequest, err)
	}
	return nil
}

// timeoutOf is seconds as a duration, or def when not given.
func timeoutOf(seconds *int64, def time.Duration) (time.Duration, error) {
	if seconds == nil {
		return def, nil
	}
	if *seconds <= 0 {
		return 0, fmt.Errorf("%w: timeout must be positive seconds, got %d", engine.ErrBadRequest, *seconds)
	}
	return time.Duration(*seconds) * time.Second, nil
}

func notFound(w http.ResponseWriter, id string) {
	apiError(w, api.CodeNotFound, "sandbox \"%s\" doesn't exist or you don't have access to it", id)
}

// pause is the SDK's pause: pauseBox of a live sandbox, 409 when it is
// paused already.
func (f *Front) pause(w http.ResponseWriter, r *http.Request) {
	b := f.live(r.PathValue("id"))
	if b == nil {
		notFound(w, r.PathValue("id"))
		return
	}
	err := f.pauseBox(r.Context(), b)
	switch {
	case errors.Is(err, errAlreadyPaused):
		apiError(w, api.CodeConflict, "%v", err)
	case err != nil:
		engineError(w, err)
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

// errAlreadyPaused: a pause of a sandbox that is paused.
var errAlreadyPaused = errors.New("already paused")

// pauseBox snapshots b's running sandbox under the name pausePrefix+id,
// records it (restore.go) and closes it; connect (or resume) starts it
// again from that snapshot, in this daemon or a later one. A sandbox
// killed meanwhile is engine.ErrNotFound.
func (f *Front) pauseBox(ctx context.Context, b *box) error {
	b.life.Lock()
	defer b.life.Unlock()
	return f.pauseLocked(ctx, b, time.Time{})
}

// pauseLocked is pauseBox with b.life held; shutdownAt is the time of the
// daemon's shutdown that pauses b (shutdown.go), zero for a pause asked
// for.
func (f *Front) pauseLocked(ctx context.Context, b *box, shutdownAt time.Time) error {
	if b.isClosed() {
		return fmt.Errorf("sandbox %s was killed: %w", b.id, engine.ErrNotFound)
	}
	sid, paused := b.engineID()
	if paused {
		return fmt.Errorf("sandbox %s is %w", b.id, errAlreadyPaused)
	}
	name := pausePrefix + b.id
	held := b.holdProcs() // pause.go
	defer b.pauseOver()
	if sb, err := f.e.Sandbox(sid); err == nil {
		if err := awaitStarts(ctx, b, sb, held); err != nil {
			unhold(held)
			return fmt.Errorf("pausing sandbox %s (it still runs): %w", b.id, err)
		}
	}
	info, kept, err := f.pauseSnapshot(ctx, b, sid, name)
	if err != nil {
		unhold(held)
		return err
	}
	if kept != pauseProcesses {
		unhold(held) // they end with the sandbox
		held = nil
	}
	b.mu.Lock()
	b.pause = kept
	b.mu.Unlock()
	if err := f.savePaused(b, name, info.InstanceID, shutdownAt); err != nil {
		unhold(held)
		if derr := f.e.DeleteSnapshot(name); derr != nil {
			f.log.Warn("deleting the pause snapshot of a pause that failed", "snapshot", name, "err", derr)
		}
		return fmt.Errorf("pausing sandbox %s (it still runs): %w", b.id, err)
	}
	runs := suspend(held)
	b.mu.Lock()
	b.paused, b.instance, b.shutdownAt = name, info.InstanceID, shutdownAt
	if b.timer != nil {
		b.timer.Stop() // a paused sandbox waits for connect or kill
	}
	for _, p := range b.procs {
		p.stop() // a kept one's run in this sandbox
	}
	if held == nil {
		b.procs = map[uint32]*proc{}
	}
	b.takePrimed("", "")
	b.endWatchers()
	b.mu.Unlock()
	if _, err := f.e.CloseSandbox(sid); err != nil && engine.Kind(err) != api.CodeGone && engine.Kind(err) != api.CodeNotFound {
		f.log.Warn("closing a paused e2b sandbox", "sandbox", b.id, "err", err)
	}
	if len(held) > 0 {
		// The record again, with the kept processes as their runs
		// left them: a next daemon resumes them too.
		awaitRuns(runs)
		if err := f.savePaused(b, name, info.InstanceID, shutdownAt); err != nil {
			f.log.Error("the paused e2b sandbox's processes are not recorded: a restarted daemon resumes them unknown to the process API", "sandbox", b.id, "err", err)
		}
	}
	what := "its files and processes kept"
	if kept != pauseProcesses {
		what = "its files kept, its processes ended: " + kept
	}
	if shutdownAt.IsZero() {
		b.logf("info", []string{"snapshot", name}, "sandbox paused: %s", what)
	} else {
		b.logf("info", []string{"snapshot", name}, "sandbox paused at the daemon's shutdown: %s", what)
	}
	return nil
}

// pauseProcesses is box.pause of a sandbox paused with its processes.
const pauseProcesses = "processes"

// pauseSnapshot takes the pause snapshot name of b's engine sandbox sid:
// with its running processes, as E2B's pause keeps memory, where the
// engine can dump them (root, a usable criu, a raw sandbox not on a
// filtered network: engine.SnapshotProcesses), else its files only; kept
// is pauseProcesses, or why files only (the engine's refusal), which
// the pause's log line and the sandbox's info (msbPause) say.
func (f *Front) pauseSnapshot(ctx context.Context, b *box, sid, name string) (info api.SnapshotInfo, kept string, err error) {
	info, err = f.e.SnapshotProcesses(ctx, sid, api.SnapshotRequest{Name: name, Processes: api.ForkProcessesAll})
	if err == nil {
		return info, pauseProcesses, nil
	}
	if !errors.Is(err, engine.ErrProcessesUnsupported) {
		return info, "", err
	}
	kept = "files only: " + err.Error()
	f.log.Info("an e2b pause keeps files only", "sandbox", b.id, "why", err)
	if info, err = f.e.Snapshot(ctx, sid, api.SnapshotRequest{Name: name}); err != nil {
		return info, kept, err
	}
	// A named snapshot answers before it is durable; the pause closes
	// its source next, so it waits until nothing can lose it.
	return info, kept, f.e.WaitSnapshot(ctx, name)
}

// connect answers a running sandbox, moving its end later when timeout
// asks for a later one, and resumes a paused one (resumeBox, 201).
func (f *Front) connect(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Timeout *int64 `json:"timeout"`
	}
	if err := decode(r, &req); err != nil {
		engineError(w, err)
		return
	}
	timeout, err := timeoutOf(req.Timeout, defaultTimeout)
	if err != nil {
		engineError(w, err)
		return
	}
	b := f.live(r.PathValue("id"))
	if b == nil {
		notFound(w, r.PathValue("id"))
		return
	}
	resumed, err := f.resumeBox(r.Context(), b, timeout, req.Timeout != nil)
	if err != nil {
		engineError(w, err)
		return
	}
	if !resumed {
		writeJSON(w, http.StatusOK, created(b))
		return
	}
	writeJSON(w, http.StatusCreated, created(b))
}

// resumeBox resumes b when it is paused: a new engine sandbox from its
// pause snapshot (resume), under the same E2B id and access token, to be
// killed (or paused) timeout from now; its record and snapshot are then
// removed. A running b has its end moved to timeout from now when that is
// later and extend asks for it. resumed says whether b was paused.
func (f *Front) resumeBox(ctx context.Context, b *box, timeout time.Duration, extend bool) (resumed bool, err error) {
	b.life.Lock()
	defer b.life.Unlock()
	if b.isClosed() {
		return false, fmt.Errorf("sandbox %s was killed: %w", b.id, engine.ErrNotFound)
	}
	b.mu.Lock()
	snap := b.paused
	b.mu.Unlock()
	if snap == "" {
		if extend {
			f.keepAlive(b, timeout)
		}
		return false, nil
	}
	sb, err := f.resume(ctx, b, snap)
	if err != nil {
		return false, err
	}
	// Its processes before the calls that find it running: none finds
	// one still suspended.
	b.mu.Lock()
	withProcs := b.pause == pauseProcesses
	b.mu.Unlock()
	if withProcs {
		f.reattach(b, sb) // pause.go
	} else {
		for _, p := range b.suspendedProcs() { // its restore failed
			f.endSuspended(b, p, endEvent(-1, "signal: killed", "the sandbox's processes could not be restored"))
		}
	}
	b.mu.Lock()
	b.sid, b.paused, b.shutdownAt = sb.ID(), "", time.Time{}
	b.mu.Unlock()
	f.forgetPaused(b.id)
	if err := f.e.DeleteSnapshot(snap); err != nil {
		f.log.Warn("deleting a resumed e2b sandbox's pause snapshot", "snapshot", snap, "err", err)
	}
	f.extend(b, timeout)
	b.logf("info", nil, "sandbox resumed")
	return true, nil
}

// snapshot names the state of a running sandbox: a template that create
// and list_snapshots know.
func (f *Front) snapshot(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Name string `json:"name"`
	}
	if err := decode(r, &req); err != nil {
		engineError(w, err)
		return
	}
	b := f.running(r.PathValue("id"))
	if b == nil {
		notFound(w, r.PathValue("id"))
		return
	}
	if strings.HasPrefix(req.Name, pausePrefix) {
		apiError(w, api.CodeBadRequest, "snapshot names starting with %s are msb's own", pausePrefix)
		return
	}
	sid, _ := b.engineID()
	info, err := f.e.Snapshot(r.Context(), sid, api.SnapshotRequest{Name: req.Name})
	if err != nil {
		engineError(w, err)
		return
	}
	f.mu.Lock()
	f.owners[info.Name] = b.id
	f.snapUsers[info.Name] = b.user
	f.mu.Unlock()
	f.saveSnapshot(info.Name, b)
	writeJSON(w, http.StatusCreated, snapshotInfo(info.Name))
}

// e2bFork is how the front end forks a snapshot alone (a create from a
// snapshot, a resumed task sandbox): with the network the sandbox asked
// for and no lifetime but the E2B timeout, which the front end keeps.
func e2bFork(network string, policy *engine.NetPolicy) engine.SnapshotForkOptions {
	return engine.SnapshotForkOptions{Network: network, NetPolicy: policy, Lifetime: -1, IdleTimeout: -1}
}

func snapshotInfo(name string) map[string]any {
	return map[string]any{"snapshotID": name, "names": []string{name}}
}

// snapshots lists the named snapshots but pause and template ones,
// oldest first, of one sandbox (sandboxID) or one name when asked, in
// pages of limit (at most and by default 100) with x-next-token when more
// follow, which the SDK's paginator sends back as nextToken: where the
// page ended, so snapshots taken or deleted between pages neither repeat
// nor shift it.
func (f *Front) snapshots(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, from, err := snapshotPage(q)
	if err != nil {
		engineError(w, err)
		return
	}
	all, err := f.e.Snapshots()
	if err != nil {
		engineError(w, err)
		return
	}
	slices.SortFunc(all, func(a, b api.SnapshotInfo) int {
		return snapCursor{a.CreatedAt, a.Name}.compare(snapCursor{b.CreatedAt, b.Name})
	})
	out := []any{}
	var last *snapCursor
	for _, s := range all {
		at := snapCursor{s.CreatedAt, s.Name}
		if from != nil && at.compare(*from) <= 0 {
			continue
		}
		f.mu.Lock()
		owner, ok := f.owners[s.Name]
		f.mu.Unlock()
		if !ok {
			owner = s.Sandbox
		}
		switch {
		case strings.HasPrefix(s.Name, pausePrefix), strings.HasPrefix(s.Name, templatePrefix),
			q.Get("sandboxID") != "" && q.Get("sandboxID") != owner,
			q.Get("name") != "" && q.Get("name") != s.Name:
			continue
		}
		if len(out) == limit {
			w.Header().Set("X-Next-Token", last.token())
			break
		}
		out, last = append(out, snapshotInfo(s.Name)), &at
	}
	writeJSON(w, http.StatusOK, out)
}

// snapCursor is where a page of list_snapshots ended: the last
// snapshot's creation time and name, which order the list.
type snapCursor struct{ created, name string }

func (c snapCursor) compare(o snapCursor) int {
	if n := strings.Compare(c.created, o.created); n != 0 {
		return n
	}
	return strings.Compare(c.name, o.name)
}

// token is c as nextToken carries it; a creation time has no "/".
func (c snapCursor) token() string {
	return base64.RawURLEncoding.EncodeToString([]byte(c.created + "/" + c.name))
}

// snapshotPage reads list_snapshots' limit (1 or more, at most
// maxListLimit, which is also the default) and nextToken.
func snapshotPage(q url.Values) (int, *snapCursor, error) {
	limit := maxListLimit
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return 0, nil, fmt.Errorf("%w: limit %q is not a positive number", engine.ErrBadRequest, s)
		}
		limit = min(n, maxListLimit)
	}
	tok := q.Get("nextToken")
	if tok == "" {
		return limit, nil, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(tok)
	created, name, ok := strings.Cut(string(b), "/")
	if err != nil || !ok {
		return 0, nil, fmt.Errorf("%w: nextToken %q is not one this list gave", engine.ErrBadRequest, tok)
	}
	return limit, &snapCursor{created, name}, nil
}

// deleteSnapshot is the SDK's delete_snapshot (E2B deletes a snapshot as
// the template it is).
func (f *Front) deleteSnapshot(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("id")
	if strings.HasPrefix(name, pausePrefix) {
		apiError(w, api.CodeNotFound, "snapshot '%s' not found", name)
		return
	}
	if err := f.e.DeleteSnapshot(name); err != nil {
		engineError(w, err)
		return
	}
	f.mu.Lock()
	delete(f.owners, name)
	delete(f.snapUsers, name)
	f.mu.Unlock()
	if err := f.rec.remove(kindSnapshot, name); err != nil {
		f.log.Error("removing a deleted e2b snapshot's record", "snapshot", name, "err", err)
	}
	w.WriteHeader(http.StatusNoContent)
}

// fork starts count new sandboxes from the live state of a running one;
// all start or none (the engine's fork), each answered as a create.
func (f *Front) fork(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Timeout *int64 `json:"timeout"`
		Count   *int   `json:"count"`
	}
	if err := decode(r, &req); err != nil {
		engineError(w, err)
		return
	}
	timeout, err := timeoutOf(req.Timeout, defaultTimeout)
	if err != nil {
		engineError(w, err)
		return
	}
	count := 1
	if req.Count != nil {
		count = *req.Count
	}
	if count < 1 || count > MaxFork {
		apiError(w, api.CodeBadRequest, "count must be 1 to %d, got %d", MaxFork, count)
		return
	}
	b := f.running(r.PathValue("id"))
	if b == nil {
		notFound(w, r.PathValue("id"))
		return
	}
	sid, _ := b.engineID()
	children, err := f.e.Fork(r.Context(), sid, api.ForkRequest{Count: count, Labels: e2bLabels()})
	if err != nil {
		engineError(w, err)
		return
	}
	out := []any{}
	b.mu.Lock()
	network, policy, private, mask, https := b.network, b.policy, b.traffic != "", b.mask, b.https
	b.mu.Unlock()
	for _, c := range children {
		cycle := b.cycle
		cycle.Timeout = timeout
		child := f.add(c.ID(), b.template, b.metadata, b.envs, cycle)
		child.mu.Lock()
		child.network, child.policy, child.mask, child.https = network, policy, mask, https
		if private { // a child of a sandbox with private URLs has its own token
			child.traffic = newToken()
		}
		child.mu.Unlock()
		out = append(out, map[string]any{"sandbox": created(child)})
	}
	writeJSON(w, http.StatusCreated, out)
}

// fromSnapshot starts a sandbox from a named snapshot, with the network
// its create asks for and no lifetime but the E2B timeout: nil, nil when
// no snapshot has that name.
func (f *Front) fromSnapshot(r *http.Request, name string, network string, policy *engine.NetPolicy) (*engine.Sandbox, error) {
	if strings.HasPrefix(name, pausePrefix) {
		return nil, nil
	}
	all, err := f.e.Snapshots()
	if err != nil {
		return nil, err
	}
	for _, s := range all {
		if s.Name == name {
			children, err := f.e.ForkSnapshot(r.Context(), "", api.ForkRequest{Snapshot: name, Labels: e2bLabels()}, e2bFork(network, policy))
			if err != nil {
				return nil, err
			}
			return children[0], nil
		}
	}
	return nil, nil
}
