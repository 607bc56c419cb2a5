package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/envcache"
	"github.com/minisandbox/msb/internal/rootfs"
	"github.com/minisandbox/msb/internal/sandbox"
	"github.com/minisandbox/msb/internal/session"
	"github.com/minisandbox/msb/internal/store"
)

// A snapshot is what a sandbox wrote, committed as one immutable layer
// (its "data layer") whose parents are the layers the sandbox was made
// of, plus the cwd and environment of each of its sessions, kept under a
// name in the store as rootfs.Snapshot describes. This file holds the
// sandbox's side: freezing it, committing its writable layer, asking its
// sessions for their state.

// Snapshot errors; test with errors.Is.
var (
	// ErrSnapshotExists: a snapshot of that name exists; delete it
	// first. It is a sandbox.ErrExists (a conflict).
	ErrSnapshotExists = fmt.Errorf("snapshot %w", sandbox.ErrExists)
	// ErrSnapshotUnsupported: the sandbox's writable layer cannot be
	// committed here (see sandbox.ErrNoWritableDir) or its processes
	// cannot be frozen (no cgroup freezer); the message says which. It
	// is an ErrBadRequest.
	ErrSnapshotUnsupported = fmt.Errorf("%w: cannot snapshot this sandbox", ErrBadRequest)
)

// sessionProbeTimeout bounds asking a session for its cwd and
// environment: a session busy with a command past it is recorded without
// them (reopened in the sandbox's defaults).
const sessionProbeTimeout = 2 * time.Second

// Snapshot commits what a live sandbox wrote as a named layer (a name is
// made up when req.Name is empty) and records its sessions' state. The
// sandbox's processes are frozen while its writable layer is read, so the
// layer is a state the sandbox was in. It answers once the layer is
// read and hashed (named) and its record staged; the store's
// publication, which writes the new content out, makes it durable and
// the name visible to other processes, ends beside the caller
// (snapshotpending.go; WaitSnapshot waits for it).
func (e *Engine) Snapshot(ctx context.Context, sandboxID string, req api.SnapshotRequest) (api.SnapshotInfo, error) {
	s, err := e.Sandbox(sandboxID)
	if err != nil {
		return api.SnapshotInfo{}, err
	}
	name := req.Name
	if name == "" {
		name = "snap-" + sandboxID + "-" + time.Now().UTC().Format("20060102T150405.000000000")
	}
	if !rootfs.ValidSnapshotName(name) {
		return api.SnapshotInfo{}, fmt.Errorf("%w: snapshot name %q: use letters, digits and ._@+=:,~- (at most 128, starting with a letter or digit)", ErrBadRequest, name)
	}
	res, err := e.reserveSnapshotRef(name)
	if err != nil {
		return api.SnapshotInfo{}, err
	}
	end := res.End
	// A panic before the publication is handed to its goroutine (net/http
	// recovers it in the daemon) ends the reservation too: else the name
	// stays taken and every wait for it (Close's included) waits for ever.
	handed := false
	defer func() {
		if !handed {
			end(fmt.Errorf("snapshot %q of sandbox %s was not taken", name, sandboxID))
		}
	}()
	st := e.cache.st()
	if _, err := st.Ref(rootfs.SnapshotRef(name)); err == nil {
		end(nil)
		return api.SnapshotInfo{}, fmt.Errorf("%w: %q", ErrSnapshotExists, name)
	}
	snap, data, err := s.stageSnapshot(ctx, name, stageHashOnly)
	if err != nil {
		end(err)
		return api.SnapshotInfo{}, err
	}
	record, err := s.stageRecord(ctx, &snap)
	if err != nil {
		data.Discard()
		end(err)
		return api.SnapshotInfo{}, err
	}
	// Publishing while the stage holds the store's lock, which a gc that
	// waits for the ref (store.Store.Refs) then cannot hold.
	res.Publishing()
	handed = true
	go func() {
		testHookPublish()
		lease, err := st.PublishLeased(context.WithoutCancel(ctx), rootfs.SnapshotRef(name), data, record)
		if err != nil {
			e.log.Error("snapshot not published", "sandbox", sandboxID, "snapshot", name, "err", err)
			end(fmt.Errorf("committing the writable layer of sandbox %s: %w", sandboxID, err))
			return
		}
		lease.Release()
		end(nil)
	}()
	e.log.Debug("snapshot taken", "sandbox", sandboxID, "snapshot", name, "layer", data.ID.Short(), "bytes", snap.rec.Bytes)
	return snap.rec.SnapshotInfo, nil
}

// Snapshots lists the named snapshots, oldest first; one whose record
// cannot be read (a layer missing from the cache) is logged and left out.
func (e *Engine) Snapshots() ([]api.SnapshotInfo, error) {
	e.waitSnapshots()
	names, err := rootfs.SnapshotNames(e.cache.st())
	if err != nil {
		return nil, err
	}
	out := []api.SnapshotInfo{}
	for _, name := range names {
		snap, err := e.loadSnapshot(context.Background(), name)
		if err != nil {
			e.log.Warn("snapshot not listed: its record is unreadable", "snapshot", name, "err", err)
			continue
		}
		out = append(out, snap.rec.SnapshotInfo)
	}
	slices.SortFunc(out, func(a, b api.SnapshotInfo) int { return strings.Compare(a.CreatedAt+a.Name, b.CreatedAt+b.Name) })
	return out, nil
}

// DeleteSnapshot removes a named snapshot's name (ErrNotFound if absent)
// and its dump when no fork restores from it (else gc does, later); gc
// then frees its layers unless a live sandbox uses them.
func (e *Engine) DeleteSnapshot(name string) error {
	e.WaitSnapshot(context.Background(), name) // published or not: then deleted or absent
	err := rootfs.DeleteSnapshot(e.cache.st(), name)
	if errors.Is(err, rootfs.ErrNoSnapshot) {
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	if err == nil {
		e.spares.Drop(snapshotKey(name))
		e.cache.sweepDump(name)
	}
	return err
}

// snapshot is a snapshot's layer and record; lease, when not nil, keeps
// the layer from gc until released. probe, when not nil, waits for the
// state of the sessions of a snapshot just taken (see sessions). created,
// for a snapshot just taken, is the content its layer brought to the
// store (store.Staged.Created: what store.Drop may remove with it).
type snapshot struct {
	layer   store.LayerID
	rec     rootfs.SnapshotRecord
	lease   *store.Lease
	probe   func() api.List[api.SnapshotSession]
	created []store.Digest
}

// sessions is the state of the snapshot's sessions: the record's, or,
// for a snapshot just taken, what its sessions answer, awaited here.
func (sn snapshot) sessions() api.List[api.SnapshotSession] {
	if sn.probe == nil {
		return sn.rec.Sessions
	}
	return sn.probe()
}

// snapshot commits the sandbox's writable layer, frozen, and leases the
// new layer (release snap.lease). With a name, the snapshot's record
// (rootfs.StageSnapshot) is committed with it, in the same barriers, once
// the sessions told their state. Without, that state may still be on its
// way when it returns (snap.sessions() waits for it), so that a fork's
// children start while the shells answer; until it came, the sandbox's
// state (stateMu) stays locked.
func (s *Sandbox) snapshot(ctx context.Context, name string) (snapshot, error) {
	return s.snapshotEarly(ctx, name, nil, nil, nil)
}

// snapshotEarly is snapshot; with early, an unnamed snapshot's layer is
// published with store.PublishLeasedEarly and early's hooks: a fork's
// children mount the layer's tree, built of what the freeze copied,
// before the layer is hashed and before the store's barriers
// (forkearly.go); staged is called first with the snapshot but its
// layer (its record's base and its sessions' state), hashed once the
// layer is, with the snapshot (without its lease). From then until it
// is published the engine knows the layer as settling
// (Engine.settling): what leases or stages on it waits.
func (s *Sandbox) snapshotEarly(ctx context.Context, name string, early *store.Early, staged, hashed func(snapshot)) (snapshot, error) {
	if name != "" { // durable when the call returns
		early = nil
	}
	how := stageWriteOut
	if early != nil {
		how = stageEarly
	}
	snap, data, err := s.stageSnapshot(ctx, name, how)
	if err != nil {
		return snapshot{}, err
	}
	if early != nil {
		staged(snap)
		hooks, settled := *early, func() {}
		hooks.Hashed = func() {
			testHookHashed()
			snap.setLayer(data)
			settled = s.e.settling.begin(data.ID)
			hashed(snap)
		}
		err = s.publish(ctx, &snap, data, &hooks)
		settled()
	} else {
		err = s.publish(ctx, &snap, data, nil)
	}
	if err != nil {
		return snapshot{}, err
	}
	return snap, nil
}

// stageHow is what stageSnapshot does with the writable layer once the
// sandbox is thawed.
type stageHow int

const (
	// stageWriteOut: hashed and written out to the store's temp files,
	// their writeback started (store.Staged.WriteOut).
	stageWriteOut stageHow = iota
	// stageEarly: copied to the store's temp files while frozen
	// (store.CommitOptions.CopyNow), not hashed: the publication builds
	// an early tree of them, then hashes them (store.Early: a fork's
	// children mount that tree); their writeback is not started before
	// the barrier (store.CommitOptions.NoWriteback). The snapshot gets
	// its layer (snapshot.setLayer) once hashed.
	stageEarly
	// stageHashOnly: hashed only (store.Staged.Hash); the publication
	// writes it (a named snapshot answers before: snapshotpending.go).
	stageHashOnly
)

// stageSnapshot stages the sandbox's writable layer, read frozen, then
// hashed (and written out, as how says), and makes the snapshot's record
// but for its sessions' state, which snap.probe waits for. On error
// nothing is left staged.
func (s *Sandbox) stageSnapshot(ctx context.Context, name string, how stageHow) (snapshot, *store.Staged, error) {
	done := s.use()
	s.stateMu.Lock()
	release := func() {
		s.stateMu.Unlock()
		done()
	}
	st := s.e.cache.st()
	conf := s.sbox().Config()
	base, err := layersOf(st, conf.Layers)
	if err == nil {
		err = s.e.settling.wait(ctx, base...) // a fork's child's layers: published
	}
	if err != nil {
		release()
		return snapshot{}, nil, err
	}
	dir, err := s.sbox().WritableDir()
	if err != nil {
		release()
		return snapshot{}, nil, fmt.Errorf("%w: %w", ErrSnapshotUnsupported, err)
	}
	thawed := make(chan time.Duration, 1)
	probe := s.probeSessions(ctx, thawed, release)
	parents := slices.Clone(base)
	slices.Reverse(parents) // topmost first
	data, err := s.stageTimed(ctx, dir, parents, how == stageEarly, thawed)
	if err != nil {
		return snapshot{}, nil, err
	}
	snap := s.snapshotBefore(name, base, conf)
	snap.probe = probe
	if how == stageEarly {
		return snap, data, nil
	}
	// While the sessions answer: what the stage read is hashed and
	// (but for stageHashOnly) written out (store.CommitOptions.HashLater).
	out := data.WriteOut
	if how == stageHashOnly {
		out = data.Hash
	}
	if err := out(ctx); err != nil {
		data.Discard()
		return snapshot{}, nil, fmt.Errorf("committing the writable layer of sandbox %s: %w", s.ID(), err)
	}
	snap.setLayer(data)
	return snap, data, nil
}

// snapshotOf is the snapshot named name (or unnamed) of the sandbox,
// whose config is conf, made of its writable layer data (hashed) over
// the layers base: its record but for the sessions' state (snap.probe).
func (s *Sandbox) snapshotOf(name string, data *store.Staged, base []store.LayerID, conf sandbox.Config) snapshot {
	snap := s.snapshotBefore(name, base, conf)
	snap.setLayer(data)
	return snap
}

// snapshotBefore is snapshotOf before its layer is hashed: its record
// but for its layer (snapshot.setLayer) and the sessions' state.
func (s *Sandbox) snapshotBefore(name string, base []store.LayerID, conf sandbox.Config) snapshot {
	info := api.SnapshotInfo{Name: name, Sandbox: s.ID(), InstanceID: s.info.InstanceID,
		CreatedAt: time.Now().UTC().Format(time.RFC3339Nano)}
	snap := snapshot{rec: rootfs.SnapshotRecord{SnapshotInfo: info, Base: base, HostBase: conf.HostBase,
		Workdir: conf.Workdir, Env: conf.Env, User: rootfs.SnapshotUser{UID: conf.User.UID, GID: conf.User.GID}}}
	snap.rec.Sudo = conf.Sudo
	if conf.ImageLayers > 0 && conf.ImageLayers <= len(base) {
		snap.rec.ImageLayers = conf.ImageLayers
	}
	return snap
}

// setLayer gives the snapshot its layer, data, once hashed.
func (sn *snapshot) setLayer(data *store.Staged) {
	sn.layer, sn.rec.Layer = data.ID, data.ID.String()
	for _, en := range data.Manifest().Entries {
		if en.Type == store.TypeFile {
			sn.rec.Files++
			sn.rec.Bytes += en.Size
		}
	}
	sn.created = data.Created()
}

// publish publishes a snapshot's staged data layer and, when it has a
// name, its record above it under that name, with the sessions' state,
// and leases the layer (snap.lease) before a gc or a store.Drop can come
// between: the same content published by another at the same time is
// the same layer, which that other may drop once done with it.
func (s *Sandbox) publish(ctx context.Context, snap *snapshot, data *store.Staged, early *store.Early) error {
	st := s.e.cache.st()
	layers, ref := []*store.Staged{data}, ""
	if early != nil {
		lease, err := st.PublishLeasedEarly(ctx, "", *early, data)
		if err != nil {
			return fmt.Errorf("committing the writable layer of sandbox %s: %w", s.ID(), err)
		}
		snap.lease = lease
		return nil
	}
	if snap.rec.Name != "" {
		record, err := s.stageRecord(ctx, snap)
		if err != nil {
			data.Discard()
			return err
		}
		layers, ref = append(layers, record), rootfs.SnapshotRef(snap.rec.Name)
	}
	lease, err := st.PublishLeased(ctx, ref, layers...)
	if err != nil {
		return fmt.Errorf("committing the writable layer of sandbox %s: %w", s.ID(), err)
	}
	snap.lease = lease
	return nil
}

// stageRecord waits for the sessions' state and stages the snapshot's
// record above data.
func (s *Sandbox) stageRecord(ctx context.Context, snap *snapshot) (*store.Staged, error) {
	snap.rec.Sessions, snap.probe = snap.probe(), nil
	return rootfs.StageSnapshot(ctx, s.e.cache.st(), snap.rec)
}

// probeSessions asks the sessions for their state while a snapshot's
// layer is committed and returns what waits for the answer. A probe the
// freeze catches halfway ends after the thaw; one that a long freeze
// (thawed says how long it was) made time out is asked again. Then
// release is called, before the answer is handed over.
func (s *Sandbox) probeSessions(ctx context.Context, thawed <-chan time.Duration, release func()) (wait func() api.List[api.SnapshotSession]) {
	probed := make(chan api.List[api.SnapshotSession], 1)
	go func() {
		states := s.recordSessions(ctx)
		if frozen := <-thawed; !states.all && frozen >= sessionProbeTimeout/2 {
			states = s.recordSessions(ctx)
		}
		release()
		probed <- states.list
	}()
	return sync.OnceValue(func() api.List[api.SnapshotSession] { return <-probed })
}

// stageTimed is stageFrozen that sends how long it took on thawed, also
// when it panics: the session probe waiting for it then releases the
// sandbox, which a panic would otherwise leave locked for good.
func (s *Sandbox) stageTimed(ctx context.Context, dir string, parents []store.LayerID, early bool, thawed chan<- time.Duration) (*store.Staged, error) {
	t0 := time.Now()
	defer func() { thawed <- time.Since(t0) }()
	return s.stageFrozen(ctx, dir, parents, early)
}

// stageFrozen stages the sandbox's writable layer (store.StageDir of dir)
// with its processes frozen, and thaws them once it is read, on every
// path. With early (a fork's children mount it early: stageEarly) its
// files are copied to the store's temp files while frozen, and their
// writeback is not started before the barrier.
func (s *Sandbox) stageFrozen(ctx context.Context, dir string, parents []store.LayerID, early bool) (staged *store.Staged, err error) {
	thaw, err := s.sbox().Freeze(ctx)
	defer func() {
		if terr := thaw(); terr != nil && err == nil {
			staged.Discard()
			staged, err = nil, terr
		}
	}()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSnapshotUnsupported, err)
	}
	testHookFrozen(s.sbox())
	if s.sbox().MapsSubIDs() {
		staged, err = s.stageMapped(ctx, parents)
	} else {
		staged, err = s.e.cache.st().StageDir(ctx, dir, store.CommitOptions{Parents: parents, MapOwner: envcache.OwnerAsRoot(), HoldBytes: snapshotHold, HashLater: true, NoWriteback: early, CopyNow: early})
	}
	if err != nil {
		return nil, fmt.Errorf("committing the writable layer of sandbox %s: %w", s.ID(), err)
	}
	return staged, nil
}

// stageMapped stages the writable layer of a sandbox whose user namespace
// maps the caller's subordinate ids as the sandbox sees it
// (sandbox.Sandbox.OpenWritable): its user's private files too, owned as
// the sandbox shows them, so that a fork (see forkOwners) gives them back.
func (s *Sandbox) stageMapped(ctx context.Context, parents []store.LayerID) (*store.Staged, error) {
	r, err := s.sbox().OpenWritable(ctx)
	if err != nil {
		return nil, err
	}
	staged, err := s.e.cache.st().StageTree(ctx, r, store.CommitOptions{Parents: parents})
	// A stream cut short is the stage's failure, which its error names.
	if cerr := r.Close(); cerr != nil && (err == nil || errors.Is(err, store.ErrTreeStream)) {
		if staged != nil {
			staged.Discard()
		}
		return nil, cerr
	}
	return staged, err
}

// snapshotHold is how much of what a sandbox wrote a snapshot keeps in
// memory while the sandbox is frozen (small files' content, read only)
// and hashes and writes to the store's temp files after the thaw
// (store.CommitOptions.HoldBytes, HashLater): the freeze lasts the
// reading of it only; past it, files are hashed and written while
// frozen. It is memory of msb's own per snapshot in flight, not a
// sandbox's.
const snapshotHold = 16 << 20

// testHookFrozen, in tests, runs while a snapshot's sandbox is frozen.
var testHookFrozen = func(*sandbox.Sandbox) {}

// testHookPublish, in tests, runs before a named snapshot that answered
// is published.
var testHookPublish = func() {}

// layersOf maps a sandbox's layer paths to the store's layers.
func layersOf(st *store.Store, paths []string) ([]store.LayerID, error) {
	out := make([]store.LayerID, len(paths))
	for i, p := range paths {
		id, ok := st.TreeLayer(p)
		if !ok {
			return nil, fmt.Errorf("%w: its layer %s is not a layer of the cache (copy mode?)", ErrSnapshotUnsupported, p)
		}
		out[i] = id
	}
	return out, nil
}

// sessionStates is what the sessions said of their state; all is false
// when one did not say.
type sessionStates struct {
	list api.List[api.SnapshotSession]
	all  bool
}

// recordSessions asks each session for its cwd and environment. The host
// name the sandbox gave them ($HOSTNAME) is left out: a fork's sessions
// take their own sandbox's (one set to another value is kept).
func (s *Sandbox) recordSessions(ctx context.Context) sessionStates {
	s.mu.Lock()
	names := make([]string, 0, len(s.sessions))
	for n := range s.sessions {
		names = append(names, n)
	}
	s.mu.Unlock()
	slices.Sort(names)
	own := "HOSTNAME=" + s.sbox().Hostname()
	out := sessionStates{list: api.List[api.SnapshotSession]{}, all: true}
	for _, n := range names {
		ss := api.SnapshotSession{Name: n, Env: api.List[string]{}}
		pctx, cancel := context.WithTimeout(ctx, sessionProbeTimeout)
		cwd, env, err := s.probeSession(pctx, n)
		cancel()
		if err == nil {
			ss.Cwd, ss.Env = cwd, slices.DeleteFunc(env, func(kv string) bool { return kv == own })
		} else {
			s.e.log.Debug("session state not recorded", "sandbox", s.ID(), "session", n, "err", err)
			out.all = false
		}
		out.list = append(out.list, ss)
	}
	return out
}

// probeSession asks session n's shell for its cwd and exported
// variables: with sessionProbe, and with sessionProbeOd when that answer
// cannot be vouched for (sessionprobe.go).
func (s *Sandbox) probeSession(ctx context.Context, n string) (cwd string, env api.List[string], err error) {
	ask := func(command string) (string, error) {
		res, err := s.sbox().SessionExec(ctx, n, session.ExecRequest{Command: command, Timeout: sessionProbeTimeout, SeparateStderr: true})
		switch {
		case err != nil:
			return "", err
		case res.ExitCode != 0 || res.Truncated:
			return "", fmt.Errorf("probe of session %q: exit status %d, output truncated %v: %s", n, res.ExitCode, res.Truncated, res.Stderr)
		}
		return res.Output, nil
	}
	out, err := ask(sessionProbe)
	if err != nil {
		return "", nil, err
	}
	if cwd, env, ok := parseStateProbe(out); ok {
		return cwd, env, nil
	}
	if out, err = ask(sessionProbeOd); err != nil {
		return "", nil, err
	}
	cwd, env = parseProbe(out)
	return cwd, env, nil
}

// loadSnapshot reads a named snapshot (ErrNotFound if absent).
func (e *Engine) loadSnapshot(ctx context.Context, name string) (snapshot, error) {
	if err := e.WaitSnapshot(ctx, name); err != nil {
		if ctx.Err() != nil {
			return snapshot{}, err
		}
		return snapshot{}, fmt.Errorf("%w: snapshot %q: %w", ErrNotFound, name, err)
	}
	rec, err := rootfs.Snapshot{Name: name}.Record(ctx, e.cache.st())
	if errors.Is(err, rootfs.ErrNoSnapshot) {
		return snapshot{}, fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	if err != nil {
		return snapshot{}, err
	}
	layer, err := rec.Data()
	if err != nil {
		return snapshot{}, err
	}
	return snapshot{layer: layer, rec: rec}, nil
}

// layerPaths materializes layers (bottom first) and the snapshot layer on
// top, and leases them (release the lease with the sandbox); a layer a
// fork publishes (settling) is waited for.
func (e *Engine) layerPaths(ctx context.Context, base []store.LayerID, top *store.LayerID) ([]string, *store.Lease, error) {
	st := e.cache.st()
	all := slices.Clone(base)
	if top != nil {
		all = append(all, *top)
	}
	if err := e.settling.wait(ctx, all...); err != nil {
		return nil, nil, err
	}
	lease, err := st.Lease(ctx, all...)
	if err != nil {
		return nil, nil, fmt.Errorf("leasing the snapshot's layers: %w", err)
	}
	paths := make([]string, len(all))
	for i, id := range all {
		if paths[i], err = st.Materialize(ctx, id); err != nil {
			lease.Release()
			return nil, nil, err
		}
	}
	return paths, lease, nil
}

// forkConfig is base's config (the sandbox's, without its upper dir)
// over snap's layers.
func forkConfig(base sandbox.Config, paths []string, hostBase bool) sandbox.Config {
	base.Layers, base.HostBase = paths, hostBase
	base.UpperDir, base.KeepUpper = "", false
	return base
}
