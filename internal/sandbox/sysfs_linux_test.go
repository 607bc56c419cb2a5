package sandbox

import (
	"reflect"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/sandbox/wire"
)

func TestParseV1Hierarchies(t *testing.T) {
	// A hybrid host's /proc/self/cgroup: cpu and cpuacct mounted together
	// at cpu,cpuacct (with cpu and cpuacct linked to it), named systemd,
	// the v2 line.
	const procCgroup = "12:pids:/user.slice\n" +
		"4:cpu,cpuacct:/\n" +
		"3:memory:/user.slice/msb\n" +
		"1:name=systemd:/user.slice/session-1.scope\n" +
		"0::/user.slice/session-1.scope\n"
	dirOf := func(name string) string {
		if name == "cpu" || name == "cpuacct" {
			return "cpu,cpuacct"
		}
		return name
	}
	got := parseV1Hierarchies(strings.NewReader(procCgroup), dirOf)
	cpu := wire.CgroupHierarchy{Dir: "cpu,cpuacct", Options: "cpu,cpuacct", Links: []string{"cpu", "cpuacct"}}
	want := map[string]wire.CgroupHierarchy{
		"pids":    {Dir: "pids", Options: "pids"},
		"memory":  {Dir: "memory", Options: "memory"},
		"cpu":     cpu,
		"cpuacct": cpu,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
}

// TestTHPModeAlways: the supervisor is asked to avoid huge pages only
// where the mode in force (bracketed) is "always".
func TestTHPModeAlways(t *testing.T) {
	for mode, want := range map[string]bool{
		"[always] madvise never\n": true,
		"always [madvise] never\n": false,
		"always madvise [never]\n": false,
		"":                         false, // no THP in the kernel
	} {
		if got := thpModeAlways(mode); got != want {
			t.Errorf("thpModeAlways(%q) = %v, want %v", mode, got, want)
		}
	}
}
