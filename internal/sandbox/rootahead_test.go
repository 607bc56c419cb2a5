package sandbox

import (
	"context"
	"errors"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/privtest"
)

// TestRootAhead: a root runtime builds the first part of a sandbox's root
// (the disk volume, the overlay, the host dirs, /dev, /tmp, /etc/hosts) on
// a thread of the host in init's mount namespace while init's runtime
// starts (create.root-ahead), the disk volume a clone of the host's mount
// of the pool; what a command then sees of its mounts, and the disk limit,
// are those of a sandbox whose init built it all.
func TestRootAhead(t *testing.T) {
	privtest.RequireRoot(t)
	rt := testRuntime(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	conf := Config{HostBase: true, Limits: Limits{DiskBytes: 32 << 20},
		Binds: []Bind{{Source: exe, Target: "/msb-test-helper", ReadOnly: true}}}
	unlock := holdPwdLock(t) // until the mount lists are compared
	ahead := create(t, rt, conf)
	noAhead = true
	t.Cleanup(func() { noAhead = false })
	byInit := create(t, rt, conf)
	noAhead = false

	has := func(sb *Sandbox) bool {
		return slices.ContainsFunc(sb.Timings(), func(p Phase) bool { return p.Name == PhaseRootAhead })
	}
	if !has(ahead) {
		t.Fatalf("no %s phase in a root runtime's sandbox: %v", PhaseRootAhead, ahead.Timings())
	}
	if has(byInit) {
		t.Fatalf("a %s phase with the root built ahead turned off", PhaseRootAhead)
	}
	a, b := mountsSeen(t, ahead), mountsSeen(t, byInit)
	unlock()
	if !slices.Equal(a, b) {
		t.Fatalf("mounts seen inside, root built ahead:\n%s\nbuilt by init:\n%s", strings.Join(a, "\n"), strings.Join(b, "\n"))
	}
	if !slices.ContainsFunc(a, func(l string) bool { return strings.HasPrefix(l, "/dev/shm btrfs ") }) {
		t.Fatalf("no /dev/shm of the disk volume among:\n%s", strings.Join(a, "\n"))
	}
	for _, sb := range []*Sandbox{ahead, byInit} {
		if out := mustFail(t, sb, "dd if=/dev/zero of=/big bs=1M count=48 2>&1"); !strings.Contains(out, "No space left") && !strings.Contains(out, "Disk quota exceeded") {
			t.Fatalf("48 MiB into a 32 MiB disk: %q", out)
		}
		mustOK(t, sb, "rm /big && echo x > /dev/shm/x && echo y > /tmp/y && /msb-test-helper -h >/dev/null 2>&1; test -s /etc/hosts")
	}
}

// TestRootAheadFails: where the host cannot start the root built ahead
// (init's mount namespace not held, or the mount thread unable to join
// it), init builds the whole root (OpRootSelf) and the sandbox is the one
// built ahead would be; where the build fails once started, the create
// fails with an error that names the root built ahead.
func TestRootAheadFails(t *testing.T) {
	privtest.RequireRoot(t)
	rt := testRuntime(t)
	conf := Config{HostBase: true, Limits: Limits{DiskBytes: 32 << 20}}
	unlock := holdPwdLock(t) // until the mount lists are compared
	defer unlock()
	want := mountsSeen(t, create(t, rt, conf))
	t.Cleanup(func() { testHookAhead = func(string) error { return nil } })
	for _, step := range []string{"hold", "join"} {
		testHookAhead = func(at string) error {
			if at == step {
				return errors.New("injected at " + step)
			}
			return nil
		}
		sb := create(t, rt, conf)
		testHookAhead = func(string) error { return nil }
		if slices.ContainsFunc(sb.Timings(), func(p Phase) bool { return p.Name == PhaseRootAhead }) {
			t.Fatalf("%s: a %s phase, with the host failing to start", step, PhaseRootAhead)
		}
		if got := mountsSeen(t, sb); !slices.Equal(got, want) {
			t.Fatalf("%s: mounts seen inside, built by init:\n%s\nbuilt ahead:\n%s", step, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if out := mustFail(t, sb, "dd if=/dev/zero of=/big bs=1M count=48 2>&1"); !strings.Contains(out, "No space left") && !strings.Contains(out, "Disk quota exceeded") {
			t.Fatalf("%s: 48 MiB into a 32 MiB disk: %q", step, out)
		}
		mustOK(t, sb, "rm /big && echo x > /dev/shm/x && echo y > /tmp/y")
	}

	testHookAhead = func(at string) error {
		if at == "build" {
			return errors.New("injected at build")
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sb, err := rt.Create(ctx, conf)
	testHookAhead = func(string) error { return nil }
	if err == nil {
		sb.Close()
		t.Fatal("a create whose root built ahead failed went on")
	}
	if msg := err.Error(); !strings.Contains(msg, "root ahead") || !strings.Contains(msg, "injected at build") || strings.Contains(msg, "sending config") {
		t.Fatalf("the root built ahead failed, and the create says: %v", err)
	}
	t.Logf("the failed create: %v", err)
	mustOK(t, create(t, rt, conf), "true") // nothing of the failed create in the way
}

// mountsSeen is a command's /proc/self/mountinfo in sb, each mount as its
// point, filesystem type, root, mount options and super options, with the
// numbers that differ from sandbox to sandbox (descriptors in the
// overlay's options, subvolume ids and names) taken out.
func mountsSeen(t *testing.T, sb *Sandbox) []string {
	t.Helper()
	varying := regexp.MustCompile(`/proc/self/fd/[0-9]+|subvolid=[0-9]+|subvol=[^,]*|/[0-9a-f]{12,}[^ ,/]*`)
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(mustOK(t, sb, "cat /proc/self/mountinfo")), "\n") {
		pre, post, ok := strings.Cut(l, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 6 || len(g) < 3 {
			t.Fatalf("mountinfo line %q", l)
		}
		out = append(out, varying.ReplaceAllString(strings.Join([]string{f[4], g[0], f[3], f[5], g[2]}, " "), "N"))
	}
	return out
}
