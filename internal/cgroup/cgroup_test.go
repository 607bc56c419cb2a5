package cgroup

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
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

// TestDestroyLeftGroup: a group whose process has exited and been reaped
// (a sandbox's at its end) is removed, every directory of it.
func TestDestroyLeftGroup(t *testing.T) {
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
	g, err := Create(info, "test-"+t.Name(), Limits{MemoryBytes: 64 << 20, Pids: 16})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sleep", "100")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := g.Add(cmd.Process.Pid); err != nil {
		cmd.Process.Kill()
		t.Fatal(err)
	}
	cmd.Process.Kill()
	cmd.Wait()
	if err := g.Destroy(); err != nil {
		t.Fatal(err)
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

// TestDetectOwnV2 checks where groups go on a cgroup v2 hierarchy, from
// the caller's cgroup, on a tree of the files detectOwnV2 reads (the real
// hierarchy is exercised by the sandbox package's TestCgroupV2).
func TestDetectOwnV2(t *testing.T) {
	const pid = 100
	mount := t.TempDir()
	scope := filepath.Join(mount, "app.slice", "run.scope")
	files := map[string]string{
		"cgroup.controllers":                              "cpu memory pids",
		"cgroup.procs":                                    "1\n100\n",
		"cgroup.subtree_control":                          "",
		"ns/cgroup.controllers":                           "cpu memory pids",
		"ns/cgroup.subtree_control":                       "",
		"ns/cgroup.procs":                                 "100\n200\n",
		"ns/cgroup.type":                                  "domain",
		"app.slice/run.scope/cgroup.type":                 "domain",
		"app.slice/run.scope/msb-self/cgroup.type":        "domain",
		"app.slice/busy.scope/cgroup.type":                "domain",
		"app.slice/nomem.scope/cgroup.type":               "domain",
		"app.slice/on.scope/cgroup.type":                  "domain",
		"app.slice/on.scope/cgroup.controllers":           "cpu memory pids",
		"app.slice/on.scope/cgroup.subtree_control":       "memory pids",
		"app.slice/on.scope/cgroup.procs":                 "",
		"app.slice/run.scope/cgroup.controllers":          "cpu memory pids",
		"app.slice/run.scope/cgroup.subtree_control":      "",
		"app.slice/run.scope/msb-self/cgroup.controllers": "",
		"app.slice/busy.scope/cgroup.controllers":         "cpu memory pids",
		"app.slice/busy.scope/cgroup.subtree_control":     "",
		"app.slice/busy.scope/cgroup.procs":               "100\n200\n",
		"app.slice/nomem.scope/cgroup.controllers":        "cpu pids",
		"app.slice/nomem.scope/cgroup.subtree_control":    "",
		"app.slice/nomem.scope/cgroup.procs":              "100\n",
		"app.slice/run.scope/cgroup.procs":                "100\n",
	}
	for name, body := range files {
		p := filepath.Join(mount, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	top := Info{Version: V2, Parents: map[string]string{"": filepath.Join(mount, "msb")}, Controllers: []string{"cpu", "memory", "pids"}, Enable: []string{mount}}
	t.Run("a cgroup namespace's busy top, root", func(t *testing.T) {
		got := detectOwnV2(filepath.Join(mount, "ns"), "/", pid, true)
		if got.Usable() || !strings.Contains(got.Reason, "also holds processes [200]") || !strings.Contains(got.Reason, "nor may the top") {
			t.Fatalf("got %+v, want unusable: the namespace's top holds another process and may not hand controllers down", got)
		}
	})
	for _, c := range []struct {
		name   string
		own    string
		root   bool
		want   Info
		reason string // a part of the reason when not usable
	}{
		{"root cgroup", "/", false, top, ""},
		{"alone in a delegated scope", "/app.slice/run.scope", false,
			Info{Version: V2, Parents: map[string]string{"": filepath.Join(scope, "msb")}, Controllers: []string{"cpu", "memory", "pids"},
				Leaf: filepath.Join(scope, SelfLeaf), Enable: []string{scope}}, ""},
		{"already moved", "/app.slice/run.scope/" + SelfLeaf, false,
			Info{Version: V2, Parents: map[string]string{"": filepath.Join(scope, "msb")}, Controllers: []string{"cpu", "memory", "pids"},
				Enable: []string{scope}}, ""},
		{"with other processes, root", "/app.slice/busy.scope", true, top, ""},
		{"with other processes, rootless", "/app.slice/busy.scope", false, Info{}, "also holds processes [200]"},
		{"controllers already handed down", "/app.slice/on.scope", false,
			Info{Version: V2, Parents: map[string]string{"": filepath.Join(mount, "app.slice/on.scope/msb")}, Controllers: []string{"cpu", "memory", "pids"},
				Enable: []string{filepath.Join(mount, "app.slice/on.scope")}}, ""},
		{"no memory controller", "/app.slice/nomem.scope", false, Info{}, "lacks memory or pids"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := detectOwnV2(mount, c.own, pid, c.root)
			if c.reason != "" {
				if got.Usable() || !strings.Contains(got.Reason, c.reason) {
					t.Fatalf("got %+v, want unusable with a reason containing %q", got, c.reason)
				}
				return
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got  %+v\nwant %+v", got, c.want)
			}
		})
	}
}
