package e2b

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/engine"
)

// What outlives the daemon: templates with a ready build, paused
// sandboxes and what create_snapshot knows of its snapshots, each as a
// record (records.go) written when it changes and loaded by Restore.
// Running sandboxes do not, unless the daemon pauses them as it stops
// (shutdown.go): the engine closes what still runs.

// Restore loads the templates and paused sandboxes an earlier daemon on
// the same cache recorded; call it before Serve. A record it cannot read
// is an error that names its file; a paused sandbox whose snapshot is
// gone is forgotten (its record removed) with a warning.
func (f *Front) Restore(ctx context.Context) error {
	tpls, err := f.rec.load(kindTemplate)
	if err != nil {
		return err
	}
	paused, err := f.rec.load(kindPaused)
	if err != nil {
		return err
	}
	named, err := f.rec.load(kindSnapshot)
	if err != nil {
		return err
	}
	snaps, err := f.e.Snapshots()
	if err != nil {
		return fmt.Errorf("listing the snapshots the e2b records name: %w", err)
	}
	have := map[string]bool{}
	for _, s := range snaps {
		have[s.Name] = true
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, id := range slices.Sorted(maps.Keys(tpls)) {
		tr := tpls[id].Template
		if !have[tr.Build.Snapshot] {
			f.log.Warn("an e2b template's build snapshot is gone: create from it fails until it is built again",
				"template", tr.Name, "snapshot", tr.Build.Snapshot)
		}
		f.templates[tr.ID] = restoredTemplate(tr)
	}
	for _, id := range slices.Sorted(maps.Keys(paused)) {
		pr := paused[id].Paused
		if !have[pr.Snapshot] {
			f.log.Warn("forgetting a paused e2b sandbox whose snapshot is gone", "sandbox", pr.ID, "snapshot", pr.Snapshot)
			if err := f.rec.remove(kindPaused, pr.ID); err != nil {
				return err
			}
			continue
		}
		b := f.restoredBox(pr)
		f.boxes[b.id] = b
		go f.sampler(b)
	}
	for _, name := range slices.Sorted(maps.Keys(named)) {
		sr := named[name].Snapshot
		if !have[sr.Name] { // deleted by msb snapshot rm, or by a daemon killed before it removed the record
			if err := f.rec.remove(kindSnapshot, sr.Name); err != nil {
				return err
			}
			continue
		}
		f.owners[sr.Name], f.snapUsers[sr.Name] = sr.Sandbox, sr.User
	}
	for _, s := range snaps {
		if id, ok := strings.CutPrefix(s.Name, pausePrefix); ok && f.boxes[id] == nil {
			f.log.Warn("a pause snapshot no paused e2b sandbox names (a pause or resume that did not finish): remove it with msb snapshot rm",
				"snapshot", s.Name)
		}
	}
	f.log.Info("e2b state restored", "templates", len(tpls), "paused", len(f.boxes), "snapshots", len(f.owners))
	return nil
}

// restoredTemplate is a template as its record has it: its ready build
// is also its last.
func restoredTemplate(tr *templateRecord) *template {
	b := &build{id: tr.Build.ID, created: tr.Build.Created, status: "ready", snapshot: tr.Build.Snapshot, config: tr.Config}
	b.logs = []buildLog{{at: time.Now(), level: "info", step: "finalize",
		message: "build ready: snapshot " + tr.Build.Snapshot + " (from the template's record, after a restart)"}}
	return &template{id: tr.ID, name: tr.Name, tags: tr.Tags, upload: tr.Upload, build: b, done: b}
}

// restoredBox is a paused sandbox as its record has it.
func (f *Front) restoredBox(pr *pausedRecord) *box {
	b := &box{id: pr.ID, template: pr.Template, token: pr.Token, user: pr.User, metadata: pr.Metadata, envs: pr.Envs,
		started: pr.Started, sid: pr.ID, paused: pr.Snapshot, end: pr.End, instance: pr.Instance, network: pr.Network,
		policy: pr.Policy, traffic: pr.Traffic, mask: pr.Mask, https: pr.HTTPS, procs: map[uint32]*proc{}, next: 1000, closed: make(chan struct{})}
	if pr.Lifecycle != nil {
		b.cycle = *pr.Lifecycle
	}
	if b.pause = pr.FilesOnly; pr.Processes {
		b.pause = pauseProcesses
	}
	for _, r := range pr.Procs { // pause.go
		p := b.restoredProc(r)
		b.procs[p.pid] = p
		b.next = max(b.next, p.pid)
	}
	if pr.ShutdownAt.IsZero() {
		b.logf("info", []string{"snapshot", pr.Snapshot}, "paused sandbox restored from its record after a daemon restart")
		return b
	}
	// Paused by the last shutdown: its timeout runs out the rest it had
	// then, as if it had run on.
	b.shutdownAt = pr.ShutdownAt
	f.setEnd(b, max(pr.End.Sub(pr.ShutdownAt), 0))
	kept := "its files are kept, its processes ended"
	if pr.Processes {
		kept = "its files and processes are kept"
	}
	b.logf("info", []string{"snapshot", pr.Snapshot}, "sandbox paused at the last daemon's shutdown restored from its record: %s; an envd call or connect resumes it", kept)
	return b
}

// saveTemplate records t with its ready build, if it has one; a record
// that cannot be written is logged: the template works until the daemon
// stops.
func (f *Front) saveTemplate(t *template) {
	t.mu.Lock()
	done := t.done
	t.mu.Unlock()
	if done == nil {
		return
	}
	err := f.rec.put(kindTemplate, t.id, func() record {
		t.mu.Lock()
		tr := &templateRecord{ID: t.id, Name: t.name, Tags: slices.Clone(t.tags), Upload: t.upload}
		b := t.done
		t.mu.Unlock()
		b.mu.Lock()
		defer b.mu.Unlock()
		tr.Build = buildRecord{ID: b.id, Created: b.created, Snapshot: b.snapshot}
		tr.Config = b.config
		return record{Template: tr}
	})
	if err != nil {
		f.log.Error("the e2b template is not recorded: a restarted daemon will not know it", "template", t.name, "err", err)
	}
}

// savePaused records b as paused on snapshot, taken of a sandbox of
// instance ("": a raw sandbox), by the shutdown at shutdownAt (zero: a
// pause asked for).
func (f *Front) savePaused(b *box, snapshot, instance string, shutdownAt time.Time) error {
	return f.rec.put(kindPaused, b.id, func() record {
		b.mu.Lock()
		defer b.mu.Unlock()
		kept := b.pause == pauseProcesses
		filesOnly := b.pause
		if kept {
			filesOnly = ""
		}
		var procs []procRecord
		for _, pid := range slices.Sorted(maps.Keys(b.procs)) {
			p := b.procs[pid]
			p.mu.Lock()
			if p.suspended {
				procs = append(procs, p.record())
			}
			p.mu.Unlock()
		}
		return record{Paused: &pausedRecord{ID: b.id, Template: b.template, Token: b.token, User: b.user,
			Metadata: b.metadata, Envs: b.envs, Started: b.started, End: b.end, Snapshot: snapshot, Processes: kept, FilesOnly: filesOnly,
			Instance: instance, Network: b.network, Policy: b.policy, Lifecycle: b.recordedCycle(), ShutdownAt: shutdownAt,
			Traffic: b.traffic, Mask: b.mask, HTTPS: b.https, Procs: procs}}
	})
}

// recordedCycle is b's lifecycle as a paused record keeps it: nil for
// E2B's default, so records of sandboxes without one stay as they were.
func (b *box) recordedCycle() *lifecycle {
	if !b.cycle.AutoPause && !b.cycle.AutoResume {
		return nil
	}
	c := b.cycle
	return &c
}

// forgetPaused removes the record of a sandbox that is no longer paused
// (resumed or killed); a failure is logged, and the next daemon drops the
// record once its snapshot is gone.
func (f *Front) forgetPaused(id string) {
	if err := f.rec.remove(kindPaused, id); err != nil {
		f.log.Error("removing a paused e2b sandbox's record", "sandbox", id, "err", err)
	}
}

// saveSnapshot records the sandbox b a named snapshot was taken of and b's
// default user; a record that cannot be written is logged: the snapshot
// is kept, a restarted daemon lists it under the engine's sandbox id and
// starts its sandboxes as their own user.
func (f *Front) saveSnapshot(name string, b *box) {
	err := f.rec.put(kindSnapshot, name, func() record {
		return record{Snapshot: &snapshotRecord{Name: name, Sandbox: b.id, User: b.user}}
	})
	if err != nil {
		f.log.Error("the e2b snapshot's sandbox and user are not recorded", "snapshot", name, "err", err)
	}
}

// resume starts b's sandbox again from its pause snapshot, with the
// network it was created with and no lifetime but the E2B timeout: one
// paused with its processes as the snapshot's fork with them (the
// engine restores its dump), falling back to its files alone when that
// fails; a task sandbox as a fork of the snapshot (which prepares its
// instance's binds and environment), any other on the snapshot as its
// image.
func (f *Front) resume(ctx context.Context, b *box, snap string) (*engine.Sandbox, error) {
	b.mu.Lock()
	instance, network, policy, kept := b.instance, b.network, b.policy, b.pause == pauseProcesses
	b.mu.Unlock()
	if kept {
		children, err := f.e.Fork(ctx, "", api.ForkRequest{Snapshot: snap, Count: 1, Processes: api.ForkProcessesAll, Labels: e2bLabels()})
		if err == nil {
			b.logf("info", []string{"snapshot", snap}, "sandbox resumed with its processes")
			return children[0], nil
		}
		if ctx.Err() != nil {
			return nil, err
		}
		f.log.Warn("an e2b resume could not restore the sandbox's processes: resuming its files only", "sandbox", b.id, "err", err)
		b.logf("warn", []string{"snapshot", snap}, "the sandbox's processes could not be restored, only its files: %v", err)
		b.mu.Lock()
		b.pause = "files only: the restore failed: " + err.Error()
		b.mu.Unlock()
	}
	if instance != "" {
		children, err := f.e.ForkSnapshot(ctx, "", api.ForkRequest{Snapshot: snap, Labels: e2bLabels()}, e2bFork(network, policy))
		if err != nil {
			return nil, err
		}
		return children[0], nil
	}
	return f.e.CreateSandbox(ctx, engine.SandboxRequest{Image: "snapshot/" + snap, Network: network, NetPolicy: policy,
		Sudo: f.sudoPath(), Lifetime: -1, IdleTimeout: -1, Labels: e2bLabels()})
}
