package cgroup

import (
	"github.com/minisandbox/msb/internal/privtest"
	"os"
	"os/exec"
	"testing"
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
