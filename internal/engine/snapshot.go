package engine

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
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
// made up when req.Name is empty) and records its sessions' cwd and
// environment. The sandbox's processes are frozen while its writable
// layer is copied, so the layer is a state the sandbox was in.
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
	if _, err := e.cache.st().Ref(rootfs.SnapshotRef(name)); err == nil {
		return api.SnapshotInfo{}, fmt.Errorf("%w: %q", ErrSnapshotExists, name)
	}
	snap, err := s.snapshot(ctx)
	if err != nil {
		return api.SnapshotInfo{}, err
	}
	defer snap.lease.Release()
	snap.rec.Name = name
	if err := rootfs.WriteSnapshot(ctx, e.cache.st(), snap.rec); err != nil {
		return api.SnapshotInfo{}, err
	}
	e.log.Debug("snapshot taken", "sandbox", sandboxID, "snapshot", name, "layer", snap.layer.Short(), "bytes", snap.rec.Bytes)
	return snap.rec.SnapshotInfo, nil
}

// Snapshots lists the named snapshots, oldest first; one whose record
// cannot be read (a layer missing from the cache) is logged and left out.
func (e *Engine) Snapshots() ([]api.SnapshotInfo, error) {
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

// DeleteSnapshot removes a named snapshot's name (ErrNotFound if absent);
// gc then frees its layers unless a live sandbox uses them.
func (e *Engine) DeleteSnapshot(name string) error {
	err := rootfs.DeleteSnapshot(e.cache.st(), name)
	if errors.Is(err, rootfs.ErrNoSnapshot) {
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	if err == nil {
		e.spares.Drop(snapshotKey(name))
	}
	return err
}

// snapshot is a snapshot's layer and record; lease, when not nil, keeps
// the layer from gc until released.
type snapshot struct {
	layer store.LayerID
	rec   rootfs.SnapshotRecord
	lease *store.Lease
}

// snapshot commits the sandbox's writable layer, frozen, with its sessions'
// state, and leases the new layer (release snap.lease).
func (s *Sandbox) snapshot(ctx context.Context) (snapshot, error) {
	defer s.use()()
	s.stateMu.Lock()
	defer s.stateMu.Unlock()
	st := s.e.cache.st()
	conf := s.sbox().Config()
	base, err := layersOf(st, conf.Layers)
	if err != nil {
		return snapshot{}, err
	}
	dir, err := s.sbox().WritableDir()
	if err != nil {
		return snapshot{}, fmt.Errorf("%w: %w", ErrSnapshotUnsupported, err)
	}
	// The sessions are asked for their state while the writable layer is
	// committed: a probe the freeze catches halfway ends after the thaw,
	// and one that a long freeze made time out is asked again.
	probed := make(chan sessionStates, 1)
	go func() { probed <- s.recordSessions(ctx) }()
	parents := slices.Clone(base)
	slices.Reverse(parents) // topmost first
	t0 := time.Now()
	layer, err := s.commitFrozen(ctx, dir, parents)
	frozen := time.Since(t0)
	states := <-probed
	if err != nil {
		return snapshot{}, err
	}
	if !states.all && frozen >= sessionProbeTimeout/2 {
		states = s.recordSessions(ctx)
	}
	sessions := states.list
	lease, err := st.Lease(ctx, layer)
	if err != nil {
		return snapshot{}, fmt.Errorf("leasing snapshot layer %s: %w", layer.Short(), err)
	}
	m, err := st.Manifest(layer)
	if err != nil {
		lease.Release()
		return snapshot{}, err
	}
	info := api.SnapshotInfo{Layer: layer.String(), Sandbox: s.ID(), InstanceID: s.info.InstanceID,
		CreatedAt: time.Now().UTC().Format(time.RFC3339Nano), Sessions: sessions}
	for _, en := range m.Entries {
		if en.Type == store.TypeFile {
			info.Files++
			info.Bytes += en.Size
		}
	}
	return snapshot{layer: layer, rec: rootfs.SnapshotRecord{SnapshotInfo: info, Base: base, HostBase: conf.HostBase,
		Workdir: conf.Workdir, Env: conf.Env, User: rootfs.SnapshotUser{UID: conf.User.UID, GID: conf.User.GID}}, lease: lease}, nil
}

// commitFrozen commits dir with the sandbox's processes frozen, and thaws
// them whatever happens.
func (s *Sandbox) commitFrozen(ctx context.Context, dir string, parents []store.LayerID) (id store.LayerID, err error) {
	thaw, err := s.sbox().Freeze(ctx)
	defer func() {
		if terr := thaw(); terr != nil && err == nil {
			err = terr
		}
	}()
	if err != nil {
		return id, fmt.Errorf("%w: %w", ErrSnapshotUnsupported, err)
	}
	testHookFrozen(s.sbox())
	if s.sbox().MapsSubIDs() {
		id, err = s.commitMapped(ctx, parents)
	} else {
		id, err = s.e.cache.st().CommitDir(ctx, dir, store.CommitOptions{Parents: parents, MapOwner: envcache.OwnerAsRoot()})
	}
	if err != nil {
		return id, fmt.Errorf("committing the writable layer of sandbox %s: %w", s.ID(), err)
	}
	return id, nil
}

// commitMapped commits the writable layer of a sandbox whose user
// namespace maps the caller's subordinate ids as the sandbox sees it
// (sandbox.Sandbox.OpenWritable): its user's private files too, owned as
// the sandbox shows them, so that a fork (see forkOwners) gives them back.
func (s *Sandbox) commitMapped(ctx context.Context, parents []store.LayerID) (store.LayerID, error) {
	r, err := s.sbox().OpenWritable(ctx)
	if err != nil {
		return store.LayerID{}, err
	}
	id, err := s.e.cache.st().CommitTree(ctx, r, store.CommitOptions{Parents: parents})
	// A stream cut short is the stage's failure, which its error names.
	if cerr := r.Close(); cerr != nil && (err == nil || errors.Is(err, store.ErrTreeStream)) {
		err = cerr
	}
	return id, err
}

// testHookFrozen, in tests, runs while a snapshot's sandbox is frozen.
var testHookFrozen = func(*sandbox.Sandbox) {}

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

// sessionProbe prints the shell's working directory and exported
// environment, NUL-terminated each, in hex (a session's output shows NUL
// as the text \x00, which the output may hold too).
const sessionProbe = `{ printf '%s\0' "$PWD"; env -0; } | od -An -v -tx1`

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
		res, err := s.sbox().SessionExec(pctx, n, session.ExecRequest{Command: sessionProbe, Timeout: sessionProbeTimeout, SeparateStderr: true})
		cancel()
		if err == nil && res.ExitCode == 0 {
			ss.Cwd, ss.Env = parseProbe(res.Output)
			ss.Env = slices.DeleteFunc(ss.Env, func(kv string) bool { return kv == own })
		} else {
			s.e.log.Debug("session state not recorded", "sandbox", s.ID(), "session", n, "err", err)
			out.all = false
		}
		out.list = append(out.list, ss)
	}
	return out
}

// shellVars are set by bash itself: not carried to a reopened session.
var shellVars = []string{"PWD", "OLDPWD", "SHLVL", "_"}

func parseProbe(out string) (cwd string, env api.List[string]) {
	env = api.List[string]{}
	raw, err := hex.DecodeString(strings.Join(strings.Fields(out), ""))
	if err != nil {
		return "", env
	}
	fields := strings.Split(strings.TrimSuffix(string(raw), "\x00"), "\x00")
	cwd = fields[0]
	for _, kv := range fields[1:] {
		name, _, ok := strings.Cut(kv, "=")
		if !ok || name == "" || slices.Contains(shellVars, name) {
			continue
		}
		env = append(env, kv)
	}
	return cwd, env
}

// loadSnapshot reads a named snapshot (ErrNotFound if absent).
func (e *Engine) loadSnapshot(ctx context.Context, name string) (snapshot, error) {
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
// top, and leases them (release the lease with the sandbox).
func (e *Engine) layerPaths(ctx context.Context, base []store.LayerID, top *store.LayerID) ([]string, *store.Lease, error) {
	st := e.cache.st()
	all := slices.Clone(base)
	if top != nil {
		all = append(all, *top)
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
