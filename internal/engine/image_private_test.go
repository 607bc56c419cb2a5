package engine

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/demo/demotest"
	"github.com/minisandbox/msb/internal/store"
)

// TestImagePrivateFork: a sandbox on an image whose USER (calc, 1000) is
// not root makes a directory only it may enter (0700) holding a file only
// it may read (0600); a snapshot records both as the sandbox sees them
// (owned by 1000, those modes), and a fork of it gives them back to its
// user, who reads the file, as does a rollback to it. Rootless (TestRootless), the
// files belong to a subordinate id the caller cannot read: the snapshot
// reads them in the sandbox's user namespace.
func TestImagePrivateFork(t *testing.T) {
	g := generated(t)
	e := openEngine(t, "", nil)
	ctx := context.Background()
	const ref = "example.com/msb-test/engine-calc-home:1"
	importCalcImage(t, e, demotest.ImageRootfs(t, g.RepoDir, g.Instances[0].BaseCommit, g.PyVersion), "/home/calc", ref)

	sb, err := e.CreateSandbox(ctx, SandboxRequest{Image: ref})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	res, err := sb.Exec(ctx, api.ExecRequest{Command: "umask 077 && mkdir priv && echo secret > priv/key && echo open > pub && chmod 644 pub", TimeoutNs: int64(time.Minute)})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("writing private files: %v %+v", err, res)
	}
	name := "private-" + sb.ID()
	info, err := e.Snapshot(ctx, sb.ID(), api.SnapshotRequest{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.DeleteSnapshot(name) })

	layer, err := store.ParseLayerID(info.Layer)
	if err == nil {
		err = e.WaitSnapshot(ctx, name) // in the store
	}
	if err != nil {
		t.Fatal(err)
	}
	m, err := e.cache.st().Manifest(layer)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]store.Entry{
		"home/calc/priv":     {Type: store.TypeDir, Mode: 0o700, UID: 1000, GID: 1000},
		"home/calc/priv/key": {Type: store.TypeFile, Mode: 0o600, UID: 1000, GID: 1000, Size: 7},
		"home/calc/pub":      {Type: store.TypeFile, Mode: 0o644, UID: 1000, GID: 1000, Size: 5},
	}
	for _, en := range m.Entries {
		w, ok := want[en.Path]
		if !ok {
			continue
		}
		delete(want, en.Path)
		if en.Type != w.Type || en.Mode != w.Mode || en.UID != w.UID || en.GID != w.GID || en.Size != w.Size {
			t.Errorf("snapshot layer's %s: %+v, want %+v", en.Path, en, w)
		}
	}
	if len(want) > 0 {
		t.Errorf("snapshot layer lacks %v", want)
	}

	kids, err := e.Fork(ctx, sb.ID(), api.ForkRequest{Snapshot: name})
	if err != nil {
		t.Fatal(err)
	}
	defer kids[0].Close()
	const show = `id -u; python3 -c 'import os, sys
for p in sys.argv[1:]:
    st = os.stat(p)
    print(p, st.st_uid, st.st_gid, oct(st.st_mode & 0o7777))' priv priv/key pub; cat priv/key; echo more >> priv/key`
	res, err = kids[0].Exec(ctx, api.ExecRequest{Command: show, TimeoutNs: int64(time.Minute)})
	const out = "1000\npriv 1000 1000 0o700\npriv/key 1000 1000 0o600\npub 1000 1000 0o644\nsecret\n"
	if err != nil || res.ExitCode != 0 || res.Stdout != out {
		t.Fatalf("the fork's user and its files: %v %+v\nwant stdout %q", err, res, out)
	}
	if !strings.HasPrefix(info.Name, "private-") || info.Files != 2 {
		t.Errorf("snapshot info %+v, want 2 files", info)
	}

	// A rollback to the snapshot gives them back too.
	if res, err = sb.Exec(ctx, api.ExecRequest{Command: "rm -rf priv pub", TimeoutNs: int64(time.Minute)}); err != nil || res.ExitCode != 0 {
		t.Fatalf("removing the files: %v %+v", err, res)
	}
	if _, err := e.Rollback(ctx, sb.ID(), api.RollbackRequest{Snapshot: name}); err != nil {
		t.Fatal(err)
	}
	res, err = sb.Exec(ctx, api.ExecRequest{Command: show, TimeoutNs: int64(time.Minute)})
	if err != nil || res.ExitCode != 0 || res.Stdout != out {
		t.Fatalf("the rolled back sandbox's user and its files: %v %+v\nwant stdout %q", err, res, out)
	}
}
