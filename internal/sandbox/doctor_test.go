package sandbox

import (
	"os"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/cgroup"
)

// TestAttachCheck: the cgroup attach note never fails doctor, and says
// which case holds: no cgroups, expedited grace periods, or the wait and
// what removes it.
func TestAttachCheck(t *testing.T) {
	rt := testRuntime(t)
	c := rt.attachCheck()
	if !c.OK || c.Required {
		t.Fatalf("a performance note must not fail doctor: %+v", c)
	}
	b, _ := os.ReadFile("/sys/kernel/rcu_expedited")
	want := "rcu_expedited"
	switch {
	case !rt.cg.Usable():
		want = "no cgroups"
	case rt.cloneInto:
		want = "CLONE_INTO_CGROUP"
	case rt.forkInside:
		want = "moved itself into its cgroups"
	case strings.TrimSpace(string(b)) == "1":
		want = "fast: RCU grace periods are expedited"
	case rt.cg.Version == cgroup.V2 && mountedFavoring():
		want = "favordynmods"
	}
	if !strings.Contains(c.Detail, want) {
		t.Fatalf("detail %q, want it to say %q", c.Detail, want)
	}
}

// mountedFavoring: a cgroup2 mount of this host has favordynmods.
func mountedFavoring() bool {
	b, _ := os.ReadFile("/proc/self/mounts")
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "cgroup2 ") && strings.Contains(line, "favordynmods") {
			return true
		}
	}
	return false
}
