package sandbox

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

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
