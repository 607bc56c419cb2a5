package sandbox

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/privtest"
	"github.com/minisandbox/msb/internal/session"
)

// resetSelf prints what a reset keeps of a sandbox: its namespaces (as
// inodes), its mount points and its host name.
const resetSelf = `readlink /proc/self/ns/net /proc/self/ns/mnt /proc/self/ns/pid /proc/self/ns/uts; hostname
awk '{print $5}' /proc/self/mountinfo | sort`

// resetLingerer names the process TestReset leaves running for a reset
// to kill.
const resetLingerer = "msb-reset-lingerer"

// TestReset puts a running sandbox on other layers in place, with and
// without a bounded disk: the supervisor (init's pid), namespaces, mounts
// (a bind of the host's among them) and host name stay; the files written
// since, /tmp's among them, and every process but the supervisor are
// gone; the disk limit still holds. A rootless runtime cannot reset in
// place (ErrResetUnsupported) and changes nothing.
func TestReset(t *testing.T) {
	rt := testRuntime(t)
	base, top := t.TempDir(), t.TempDir()
	os.Chmod(base, 0o755)
	os.Chmod(top, 0o755)
	os.WriteFile(filepath.Join(base, "f"), []byte("base\n"), 0o644)
	os.WriteFile(filepath.Join(top, "f"), []byte("top\n"), 0o644)
	for _, tc := range []struct {
		name  string
		limit Limits
	}{{"HostUpper", Limits{}}, {"Disk", Limits{DiskBytes: 64 << 20}}} {
		t.Run(tc.name, func(t *testing.T) {
			sb := create(t, rt, Config{HostBase: true, Layers: []string{base}, Limits: tc.limit,
				Binds: []Bind{{Source: top, Target: "/mnt/top", ReadOnly: true}}})
			pid, self := sb.InitPid(), mustOK(t, sb, resetSelf)
			mustOK(t, sb, "echo new > /new && echo tmp > /tmp/t && echo shm > /dev/shm/s")
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			if err := sb.OpenSession(ctx, "bg", SessionOptions{}); err != nil {
				t.Fatal(err)
			}
			job := "(setsid /bin/bash -c 'exec -a " + resetLingerer + " sleep 1000' </dev/null >/dev/null 2>&1 &)"
			if _, err := sb.SessionExec(ctx, "bg", session.ExecRequest{Command: job}); err != nil {
				t.Fatal(err)
			}
			for i := 0; countProcs(resetLingerer) == 0; i++ { // its exec may come after the command's end
				if i == 300 {
					t.Fatal("the background process never started")
				}
				time.Sleep(100 * time.Millisecond)
			}
			err := sb.Reset(ctx, Deferred{Layers: []string{base, top}})
			if rt.Rootless() {
				if !errors.Is(err, ErrResetUnsupported) {
					t.Fatalf("rootless reset: %v, want ErrResetUnsupported", err)
				}
				if got := mustOK(t, sb, "cat /new"); got != "new\n" {
					t.Fatalf("a refused reset changed the files: /new is %q", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := sb.InitPid(); got != pid {
				t.Errorf("init is %d after the reset, was %d", got, pid)
			}
			if got := mustOK(t, sb, resetSelf); got != self {
				t.Errorf("after the reset the sandbox sees itself as\n%s\nnot as before\n%s", got, self)
			}
			want := "top\ntop\n0\n"
			got := mustOK(t, sb, "cat /f /mnt/top/f; n=0; for f in /new /tmp/t /dev/shm/s; do [ -e $f ] && n=$((n+1)); done; echo $n")
			if got != want {
				t.Errorf("after the reset: %q, want %q", got, want)
			}
			if n := countProcs(resetLingerer); n != 0 {
				t.Errorf("%d processes of the sandbox outlived the reset", n)
			}
			if _, err := sb.SessionExec(ctx, "bg", session.ExecRequest{Command: "true"}); !errors.Is(err, ErrNotFound) {
				t.Errorf("a session outlived the reset: %v", err)
			}
			if got := sb.Config().Layers; len(got) != 2 || got[1] != top {
				t.Errorf("config layers after the reset: %q", got)
			}
			if tc.limit.DiskBytes > 0 {
				res := sh(t, sb, "head -c 80M /dev/zero > /big")
				if res.ExitCode == 0 {
					t.Errorf("wrote 80 MiB to a disk of 64 after the reset")
				}
				mustOK(t, sb, "rm -f /big")
			}
			// Again, to no layers (the host's dirs alone), then back to the base.
			if err := sb.Reset(ctx, Deferred{}); err != nil {
				t.Fatal(err)
			}
			if got := mustOK(t, sb, "test -e /f || echo none"); got != "none\n" {
				t.Errorf("after the reset to no layers: %q", got)
			}
			if err := sb.Reset(ctx, Deferred{Layers: []string{base}}); err != nil {
				t.Fatal(err)
			}
			if got := mustOK(t, sb, "cat /f; echo "+strconv.Itoa(sb.InitPid())); got != "base\n"+strconv.Itoa(pid)+"\n" {
				t.Errorf("after the second reset: %q", got)
			}
		})
	}
}

// TestResetRootless reruns TestReset as an unprivileged user.
func TestResetRootless(t *testing.T) {
	privtest.Unprivileged(t, "^TestReset$")
}

// TestReadMountinfo parses a mountinfo with optional fields and an
// escaped space in a mount point.
func TestReadMountinfo(t *testing.T) {
	p := filepath.Join(t.TempDir(), "mountinfo")
	os.WriteFile(p, []byte(`900 800 0:50 / / rw,relatime - overlay overlay rw,lowerdir=/proc/self/fd/7,upperdir=/proc/self/fd/8,workdir=/proc/self/fd/9,volatile
901 900 0:51 / /proc rw,nosuid,nodev,noexec,relatime shared:5 master:2 - proc proc rw
902 901 0:52 / /proc/sys ro,relatime - proc proc rw
903 900 8:1 /data /my\040data rw - ext4 /dev/sda1 rw
`), 0o644)
	got, err := readMountinfo(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 || got[0].fstype != "overlay" || got[1].point != "/proc" || got[1].parent != 900 || got[2].parent != 901 || got[3].point != "/my data" {
		t.Fatalf("parsed %+v", got)
	}
	if super := got[0].super; super[len(super)-1] != "volatile" {
		t.Errorf("overlay's options %q", super)
	}
	os.WriteFile(p, []byte("1 2 3\n"), 0o644)
	if _, err := readMountinfo(p); err == nil {
		t.Error("a short line parsed")
	}
}
