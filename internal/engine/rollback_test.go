package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/privtest"
	"github.com/minisandbox/msb/internal/sandbox"
	"github.com/minisandbox/msb/internal/store"
)

// sandboxSelf prints what a sandbox's processes see of the sandbox
// itself rather than of its files: its host name (as set, in the
// environment and in /etc/hosts), its mount points, its network
// interfaces and the limits its cgroup shows (where it has one).
const sandboxSelf = `hostname; echo "$HOSTNAME"; grep -c "$(hostname)" /etc/hosts
awk '{print $5}' /proc/self/mountinfo | sort
ls /sys/class/net
cat /sys/fs/cgroup/pids.max /sys/fs/cgroup/memory.max /sys/fs/cgroup/pids/pids.max /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || true`

// lingerers counts the processes of the sandbox named lingerer.
const lingerers = `n=0; for c in /proc/[0-9]*/comm; do [ "$(cat "$c" 2>/dev/null)" = lingerer ] && n=$((n+1)); done; echo $n`

// TestRollbackKeepsSandbox rolls a raw and a task sandbox back to a
// snapshot, then to their creation (in root mode in place, init kept):
// each time the sandbox is the same one to its processes (host name, mounts with the task's binds,
// interfaces, cgroup limits), what was written after the snapshot is
// gone, a background process started after it is gone, and the session
// is back in the snapshot's directory and variables.
func TestRollbackKeepsSandbox(t *testing.T) {
	e := snapshotEngine(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		req  SandboxRequest
		dir  string // where the agent works
	}{
		{"Raw", SandboxRequest{HostBase: true, Limits: api.Limits{Pids: 77, MemoryBytes: 300 << 20}}, "/work"},
		{"Task", SandboxRequest{InstanceID: generated(t).Instances[0].InstanceID}, "/testbed/work"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := e.CreateSandbox(ctx, tc.req)
			if err != nil {
				t.Fatal(err)
			}
			closeAll(t, s)
			self, pid := sh(t, s, "", sandboxSelf), s.InitPid()
			inPlace := func(to string) { // root mode: both rollbacks keep init
				t.Helper()
				if os.Geteuid() == 0 && s.InitPid() != pid {
					t.Errorf("the rollback to %s replaced init %d by %d: not in place", to, pid, s.InitPid())
				}
			}
			if err := s.OpenSession(ctx, api.SessionRequest{Name: "main"}); err != nil {
				t.Fatal(err)
			}
			sh(t, s, "main", fmt.Sprintf("mkdir -p %[1]s && cd %[1]s && echo kept > kept.txt && export STEP=one", tc.dir))
			name := "rollback-keeps-" + strings.ToLower(tc.name)
			if _, err := e.Snapshot(ctx, s.ID(), api.SnapshotRequest{Name: name}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { e.DeleteSnapshot(name) })
			sh(t, s, "main", fmt.Sprintf("echo lost > %[1]s/lost.txt && cp /bin/sleep %[1]s/lingerer && (setsid %[1]s/lingerer 1000 >/dev/null 2>&1 &) && cd / && export STEP=two", tc.dir))
			// The background start may not have reached its exec yet: wait
			// for it (up to 30 s, for a slow machine).
			waitOne := "for i in $(seq 300); do n=$(" + lingerers + "); [ $n = 1 ] && break; sleep 0.1; done; echo $n"
			if got := sh(t, s, "", waitOne); got != "1\n" {
				t.Fatalf("lingerers before the rollback: %q", got)
			}

			info, err := e.Rollback(ctx, s.ID(), api.RollbackRequest{Snapshot: name})
			if err != nil {
				t.Fatal(err)
			}
			if info.ID != s.ID() {
				t.Fatalf("rolled back into %s, want %s", info.ID, s.ID())
			}
			inPlace("the snapshot")
			if got := sh(t, s, "", sandboxSelf); got != self {
				t.Fatalf("after the rollback to the snapshot the sandbox sees itself as\n%s\nnot as before\n%s", got, self)
			}
			if got := sh(t, s, "main", `echo "$PWD $STEP"; ls`); got != tc.dir+" one\nkept.txt\n" {
				t.Fatalf("after the rollback to the snapshot: %q", got)
			}
			if got := sh(t, s, "", lingerers); got != "0\n" {
				t.Fatalf("lingerers after the rollback: %q", got)
			}

			if _, err := e.Rollback(ctx, s.ID(), api.RollbackRequest{}); err != nil {
				t.Fatal(err)
			}
			inPlace("creation")
			if got := sh(t, s, "", sandboxSelf); got != self {
				t.Fatalf("after the rollback to creation the sandbox sees itself as\n%s\nnot as before\n%s", got, self)
			}
			if got := sh(t, s, "main", fmt.Sprintf(`echo "${STEP-unset}"; test -e %s || echo gone`, tc.dir)); got != "unset\ngone\n" {
				t.Fatalf("after the rollback to creation: %q", got)
			}
		})
	}
}

// TestRollbackKeepsNetPolicy: a filtered sandbox whose policy was
// narrowed after its creation keeps the narrower policy across a
// rollback, to a snapshot or to its creation (not the one it was
// created with), and a fork of it starts with the narrower one.
func TestRollbackKeepsNetPolicy(t *testing.T) {
	e := snapshotEngine(t)
	ctx := context.Background()
	open, closed := privtest.ServeOK(t), privtest.ServeOK(t)
	allow := func(ports ...int) *NetPolicy {
		p := &NetPolicy{Deny: []string{"0.0.0.0/0"}}
		for _, port := range ports {
			p.Allow = append(p.Allow, fmt.Sprintf("127.0.0.1:%d", port))
		}
		return p
	}
	s, err := e.CreateSandbox(ctx, SandboxRequest{HostBase: true, Network: NetworkFiltered, NetPolicy: allow(open, closed)})
	if errors.Is(err, sandbox.ErrNoForwarder) {
		privtest.Skip(t, "%v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	closeAll(t, s)
	reaches := func(s *Sandbox, port int) bool {
		t.Helper()
		// Bounded: a refused or dropped connection fails within 10s.
		cmd := fmt.Sprintf("timeout 10 bash -c 'exec 3<>/dev/tcp/%s/%d && head -c2 <&3'", sandbox.HostLoopback, port)
		res, err := s.Exec(ctx, api.ExecRequest{Command: cmd, TimeoutNs: int64(time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		return res.ExitCode == 0 && res.Stdout == "ok"
	}
	if !reaches(s, open) || !reaches(s, closed) {
		t.Fatal("the policy at creation does not let the sandbox reach both ports")
	}
	if err := s.UpdateNetPolicy(ctx, allow(open)); err != nil {
		t.Fatal(err)
	}
	if !reaches(s, open) || reaches(s, closed) {
		t.Fatal("the narrowed policy is not in force")
	}
	// A fork starts with the policy in force too (here, before a rollback replaced the sandbox).
	kids, err := e.Fork(ctx, s.ID(), api.ForkRequest{})
	if err != nil {
		t.Fatal(err)
	}
	closeAll(t, kids...)
	if !reaches(kids[0], open) || reaches(kids[0], closed) {
		t.Fatal("a fork of the sandbox does not have the narrowed policy")
	}
	if _, err := e.Snapshot(ctx, s.ID(), api.SnapshotRequest{Name: "rollback-policy"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.DeleteSnapshot("rollback-policy") })
	for _, req := range []api.RollbackRequest{{Snapshot: "rollback-policy"}, {}} {
		if _, err := e.Rollback(ctx, s.ID(), req); err != nil {
			t.Fatal(err)
		}
		if !reaches(s, open) || reaches(s, closed) {
			t.Fatalf("after a rollback to %q the sandbox's policy is not the narrowed one", req.Snapshot)
		}
	}
}

// hostSelf prints a sandbox's host name as set, in the environment (of
// the exec or session it runs in) and whether /etc/hosts names it.
const hostSelf = `hostname; echo "$HOSTNAME"; grep -qw "$(hostname)" /etc/hosts && echo hosts`

// TestRollbackForkHostnames: a sandbox rolled back keeps its host name,
// and two children forked of it after the rollback (of its live state,
// then of a named snapshot) each have their own, their id's, in exec and
// in the session they reopen: not the parent's (which the rollback set
// explicitly, and the parent's session had in its environment). A child
// rolled back in turn keeps its own.
func TestRollbackForkHostnames(t *testing.T) {
	e := snapshotEngine(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		req  SandboxRequest
	}{
		{"Raw", SandboxRequest{HostBase: true}},
		{"Task", SandboxRequest{InstanceID: generated(t).Instances[0].InstanceID}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := e.CreateSandbox(ctx, tc.req)
			if err != nil {
				t.Fatal(err)
			}
			closeAll(t, s)
			if err := s.OpenSession(ctx, api.SessionRequest{Name: "main"}); err != nil {
				t.Fatal(err)
			}
			named := func(s *Sandbox) string {
				n := "msb-" + s.ID()[:8]
				return n + "\n" + n + "\nhosts\n"
			}
			isNamed := func(what string, s *Sandbox, sessions ...string) {
				t.Helper()
				for _, ss := range append([]string{""}, sessions...) {
					if got := sh(t, s, ss, hostSelf); got != named(s) {
						t.Fatalf("%s (session %q) sees itself as %q, want %q", what, ss, got, named(s))
					}
				}
			}
			isNamed("the sandbox", s, "main")
			if _, err := e.Rollback(ctx, s.ID(), api.RollbackRequest{}); err != nil {
				t.Fatal(err)
			}
			isNamed("the rolled back sandbox", s, "main")

			kids, err := e.Fork(ctx, s.ID(), api.ForkRequest{})
			if err != nil {
				t.Fatal(err)
			}
			closeAll(t, kids...)
			name := "fork-hostnames-" + strings.ToLower(tc.name)
			if _, err := e.Snapshot(ctx, s.ID(), api.SnapshotRequest{Name: name}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { e.DeleteSnapshot(name) })
			more, err := e.Fork(ctx, s.ID(), api.ForkRequest{Snapshot: name})
			if err != nil {
				t.Fatal(err)
			}
			closeAll(t, more...)
			kids = append(kids, more...)
			for i, k := range kids {
				isNamed(fmt.Sprintf("child %d", i+1), k, "main")
			}
			if kids[0].ID() == kids[1].ID() || kids[0].ID() == s.ID() {
				t.Fatalf("children %s and %s of %s", kids[0].ID(), kids[1].ID(), s.ID())
			}
			isNamed("the parent after the forks", s, "main")

			if _, err := e.Rollback(ctx, kids[0].ID(), api.RollbackRequest{Snapshot: name}); err != nil {
				t.Fatal(err)
			}
			isNamed("the rolled back child", kids[0], "main")
		})
	}
}

// TestRollbackInPlace rolls back a sandbox whose writer runs on, to a
// snapshot taken while it wrote: no file written after the snapshot is
// left (the files are the snapshot's, the same before and after a
// command: the writer is gone). The sandbox is reset in place, in root
// mode and rootless (TestRootless) on a kernel from 6.15: the
// same init (the supervisor), namespaces (network, mount, PID, UTS,
// cgroup) and cgroups on the host. Rootless on an older kernel it is
// replaced: a new init.
func TestRollbackInPlace(t *testing.T) {
	e := snapshotEngine(t)
	ctx := context.Background()
	s := hostSandbox(t, e)
	const namespaces = "readlink /proc/self/ns/net /proc/self/ns/mnt /proc/self/ns/pid /proc/self/ns/uts /proc/self/ns/cgroup"
	pid, nsBefore := s.InitPid(), sh(t, s, "", namespaces)
	cgBefore := cgroupDirs(pid)
	if err := s.OpenSession(ctx, api.SessionRequest{Name: "w"}); err != nil {
		t.Fatal(err)
	}
	// The writer stops at 400000 files: a rootless sandbox without a cgroup
	// has a disk of 524288 inodes (4 GiB of memory, one per 8 KiB), which an
	// endless writer filled under load (ENOSPC) before the rollback came.
	sh(t, s, "w", `mkdir -p /work/w; (i=0; while [ $i -lt 400000 ]; do echo $i >/work/w/$i; i=$((i+1)); done) >/dev/null 2>&1 &`)
	waitFiles(t, s, "/work/w", 100)
	info, err := e.Snapshot(ctx, s.ID(), api.SnapshotRequest{Name: "in-place"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.DeleteSnapshot("in-place") })
	layer, err := store.ParseLayerID(info.Layer)
	if err == nil {
		err = e.WaitSnapshot(ctx, "in-place") // in the store
	}
	if err != nil {
		t.Fatal(err)
	}
	m, err := e.cache.st().Manifest(layer)
	if err != nil {
		t.Fatal(err)
	}
	snapped := numbered(m, "work/w/")
	waitFiles(t, s, "/work/w", len(snapped)+100) // written after the snapshot
	sh(t, s, "", "echo after >/work/after")

	if _, err := e.Rollback(ctx, s.ID(), api.RollbackRequest{Snapshot: "in-place"}); err != nil {
		t.Fatal(err)
	}
	files := func() []int {
		ents, err := s.ListDir(ctx, "/work/w")
		if err != nil {
			t.Fatal(err)
		}
		var out []int
		for _, en := range ents {
			if n, err := strconv.Atoi(en.Name); err == nil {
				out = append(out, n)
			}
		}
		slices.Sort(out)
		return out
	}
	got := files()
	if !slices.Equal(got, snapped) {
		t.Errorf("after the rollback /work/w has %d files (%v...), the snapshot %d", len(got), got[:min(len(got), 5)], len(snapped))
	}
	if out := sh(t, s, "", "test -e /work/after && echo there || echo gone"); out != "gone\n" {
		t.Errorf("a file written after the snapshot is %s after the rollback", strings.TrimSpace(out))
	}
	if again := files(); !slices.Equal(again, got) {
		t.Errorf("/work/w changed after the rollback: %d files, then %d (a writer outlived it)", len(got), len(again))
	}
	if os.Geteuid() != 0 && sandbox.RootlessResetKernel() != nil {
		if s.InitPid() == pid {
			t.Errorf("a rootless rollback on a kernel before 6.15 kept init %d: it replaces the sandbox", pid)
		}
		return
	}
	if got := s.InitPid(); got != pid {
		t.Errorf("init is %d after the rollback in place, was %d", got, pid)
	}
	if got := sh(t, s, "", namespaces); got != nsBefore {
		t.Errorf("namespaces after the rollback:\n%s\nbefore:\n%s", got, nsBefore)
	}
	if got := cgroupDirs(pid); !slices.Equal(got, cgBefore) {
		t.Errorf("cgroups after the rollback %q, before %q", got, cgBefore)
	}
}

// waitFiles waits until dir in s holds at least n entries (a writer runs
// in s), for up to a minute. A count of listings bounded it before: the
// listings a writer's first 100 files take grow with the load (up to 2553
// at load ~27 here), and at load ~30 the 10000 ran out.
func waitFiles(t *testing.T, s *Sandbox, dir string, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for got := countFiles(t, s, dir); got < n; got = countFiles(t, s, dir) {
		if time.Now().After(deadline) {
			t.Fatalf("%s held %d files after a minute, want %d", dir, got, n)
		}
		time.Sleep(time.Millisecond)
	}
}
