package cgroup

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/privtest"
)

func TestCreateLimitKillDestroy(t *testing.T) {
	info := Detect(os.Getenv("MSB_CGROUP_PARENT"))
	if !info.Usable() {
		if os.Geteuid() == 0 {
			t.Fatalf("root but no usable cgroup: %s", info.Reason)
		}
		privtest.Skip(t, "no cgroup: %s", info.Reason)
	}
	if err := PrepareParents(info); err != nil {
		t.Fatal(err)
	}
	g, err := Create(info, "test-"+t.Name(), Limits{MemoryBytes: 64 << 20, Pids: 16, CPUs: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sleep", "100")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := g.Add(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	u, err := g.Usage()
	if err != nil || u.Pids != 1 {
		t.Fatalf("usage %+v, %v; want 1 pid", u, err)
	}
	if err := g.Destroy(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err == nil {
		t.Fatal("sleep should have been killed")
	}
	for _, d := range g.Dirs() {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Fatalf("%s still exists", d)
		}
	}
}

func TestNegativeLimitRejected(t *testing.T) {
	info := Detect(os.Getenv("MSB_CGROUP_PARENT"))
	if !info.Usable() {
		privtest.Skip(t, "no cgroup: %s", info.Reason)
	}
	if err := PrepareParents(info); err != nil {
		t.Fatal(err)
	}
	if _, err := Create(info, "neg", Limits{Pids: -1}); err == nil {
		t.Fatal("negative limit accepted")
	}
	for _, p := range info.Parents {
		if _, err := os.Stat(p + "/neg"); !os.IsNotExist(err) {
			t.Fatalf("failed create left %s/neg", p)
		}
	}
}

func TestMemAvailable(t *testing.T) {
	if n := MemAvailable(); n <= 0 {
		t.Fatalf("MemAvailable = %d", n)
	}
}

// TestDetectDelegatedV1: a directory in a v1 hierarchy names the same path
// in each v1 hierarchy; a hierarchy's root is refused (TestRootlessDelegatedCgroup
// in package sandbox runs sandboxes under such a parent as an unprivileged user).
func TestDetectDelegatedV1(t *testing.T) {
	privtest.RequireRoot(t)
	if !isV1(filepath.Join(Root, "memory")) || !isV1(filepath.Join(Root, "pids")) {
		privtest.Skip(t, "no cgroup v1 memory and pids hierarchies")
	}
	name := "msb-test-detect-" + strconv.Itoa(os.Getpid())
	for _, c := range []string{"memory", "pids"} {
		if err := os.Mkdir(filepath.Join(Root, c, name), 0o755); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(filepath.Join(Root, c, name))
	}
	info := Detect(filepath.Join(Root, "memory", name, "msb"))
	if info.Version != V1 || info.Parents["memory"] != filepath.Join(Root, "memory", name, "msb") ||
		info.Parents["pids"] != filepath.Join(Root, "pids", name, "msb") {
		t.Fatalf("delegated v1: %+v", info)
	}
	if info := Detect(filepath.Join(Root, "pids")); info.Usable() || !strings.Contains(info.Reason, "root of a cgroup v1 hierarchy") {
		t.Fatalf("a hierarchy's root: %+v", info)
	}
}
