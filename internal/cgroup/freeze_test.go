package cgroup

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/privtest"
)

// TestFreezeThaw freezes a group whose process appends to a file without
// pause: frozen, the file stops growing; thawed, it grows again; a group
// left frozen is still destroyed (its process killed).
func TestFreezeThaw(t *testing.T) {
	info := Detect(os.Getenv("MSB_CGROUP_PARENT"))
	if !info.Usable() {
		privtest.Skip(t, "no cgroup: %s", info.Reason)
	}
	if err := PrepareParents(info); err != nil {
		t.Fatal(err)
	}
	g, err := Create(info, "test-"+t.Name(), Limits{Pids: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Destroy()
	if info.Version == V1 && g.dirs["freezer"] == "" {
		if err := g.Freeze(context.Background()); err == nil {
			t.Fatal("froze a v1 group without a freezer")
		}
		privtest.Skip(t, "no v1 freezer here")
	}
	out := filepath.Join(t.TempDir(), "out")
	cmd := exec.Command("sh", "-c", `while :; do echo x >>"$0"; done`, out)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	if err := g.Add(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	size := func() int64 {
		st, _ := os.Stat(out)
		if st == nil {
			return 0
		}
		return st.Size()
	}
	waitGrowth(t, size, size())
	if err := g.Freeze(context.Background()); err != nil {
		t.Fatal(err)
	}
	frozen := size()
	time.Sleep(50 * time.Millisecond)
	if got := size(); got != frozen {
		t.Fatalf("the file grew from %d to %d bytes while frozen", frozen, got)
	}
	if err := g.Thaw(); err != nil {
		t.Fatal(err)
	}
	waitGrowth(t, size, frozen)
	if err := g.Freeze(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := g.Destroy(); err != nil {
		t.Fatalf("destroying a frozen group: %v", err)
	}
	if err := cmd.Wait(); err == nil {
		t.Fatal("the writer was not killed")
	}
}

// waitGrowth waits until size is past from.
func waitGrowth(t *testing.T, size func() int64, from int64) {
	t.Helper()
	for i := 0; size() <= from; i++ {
		if i == 5000 {
			t.Fatalf("the file did not grow past %d bytes", from)
		}
		time.Sleep(time.Millisecond)
	}
}
