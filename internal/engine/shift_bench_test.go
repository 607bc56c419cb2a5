package engine

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/demo/demotest"
	"github.com/minisandbox/msb/internal/envcache"
	"github.com/minisandbox/msb/internal/privtest"
	"github.com/minisandbox/msb/internal/sandbox"
)

// shiftBenchEnv runs TestImageShiftedBench (rootless, as privtest's user):
// MSB_SHIFT_BENCH=ROUNDS.
const shiftBenchEnv = "MSB_SHIFT_BENCH"

// TestImageShiftedBench measures sandboxes on an image whose user owns
// a repository-like tree, /home/calc/repo/pNN/mMM (40 of 25: 1042 owned
// directories), a 4 KiB file in each mMM, rootless, three ways: with
// init's chowns ("chown", the runtime without its Shifter), with a
// shifted layer of the files only ("files", envcache.ShifterDirs with no
// directory layers: init chowns the directories, as in session 14) and
// with the directories in the shifted layer too ("dirs",
// envcache.Shifter); interleaved round by round, the order rotated each
// round. create is CreateSandbox's time, disk and inodes the writable
// layer's use after create (statvfs of the root inside). The first
// sandbox of each shifted way, which builds its layer, is reported apart.
// It runs only with MSB_SHIFT_BENCH set (to the number of rounds); as
// root it reruns itself rootless. With MSB_SHIFT_BENCH_TREE=deep the tree
// is 8 chains of owned directories 40 deep under /home/calc/app/mK (a
// node_modules of node_modules; 43 owned ones deep in all, 329 owned
// directories), a 4 KiB file at each level, and the ways are "chown",
// "dirs12" (envcache.ShifterDirs with 12 directory layers, the bound until
// session 16: init chowns the directories deeper) and "dirs".
func TestImageShiftedBench(t *testing.T) {
	rounds, _ := strconv.Atoi(os.Getenv(shiftBenchEnv))
	if rounds <= 0 {
		t.Skip(shiftBenchEnv + " is not set: a benchmark")
	}
	deep := os.Getenv(shiftBenchEnv+"_TREE") == "deep"
	if os.Geteuid() == 0 {
		env := []string{shiftBenchEnv + "=" + strconv.Itoa(rounds)}
		if deep {
			env = append(env, shiftBenchEnv+"_TREE=deep")
		}
		privtest.UnprivilegedEnv(t, "^TestImageShiftedBench$", env...)
		return
	}
	g := generated(t)
	e := openEngine(t, "", nil)
	ctx := context.Background()
	root := demotest.ImageRootfs(t, g.RepoDir, g.Instances[0].BaseCommit, g.PyVersion)
	home := filepath.Join(root, "home", "calc")
	buf := make([]byte, 4<<10)
	for i := range 8 {
		if !deep {
			break
		}
		dir := filepath.Join(home, "app", fmt.Sprintf("m%d", i))
		for j := range 40 {
			dir = filepath.Join(dir, fmt.Sprintf("d%02d", j))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			rand.Read(buf)
			if err := os.WriteFile(filepath.Join(dir, "index.js"), buf, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range 40 {
		if deep {
			break
		}
		for j := range 25 {
			dir := filepath.Join(home, "repo", fmt.Sprintf("p%02d", i), fmt.Sprintf("m%02d", j))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			rand.Read(buf)
			if err := os.WriteFile(filepath.Join(dir, "mod.py"), buf, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	const ref = "example.com/msb-test/engine-shift-bench:1"
	importCalcOwned(t, e, root, ref)
	st := e.cache.st()
	shifters := map[string]sandbox.Shifter{"dirs": envcache.Shifter(st), "files": envcache.ShifterDirs(st, 0), "dirs12": envcache.ShifterDirs(st, 12)}
	defer e.rt.SetShifter(shifters["dirs"])
	const probe = `python3 -c 'import os; s = os.statvfs("/"); print((s.f_blocks - s.f_bfree) * s.f_frsize, s.f_files - s.f_ffree)'`
	type use struct{ bytes, inodes int64 }
	one := func(how string) (time.Duration, use) {
		e.rt.SetShifter(shifters[how]) // nil for chown
		t0 := time.Now()
		sb, err := e.CreateSandbox(ctx, SandboxRequest{Image: ref})
		took := time.Since(t0)
		if err != nil {
			t.Fatal(err)
		}
		defer sb.Close()
		res, err := sb.Exec(ctx, api.ExecRequest{Command: probe, TimeoutNs: int64(time.Minute)})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("%s: %v %+v", how, err, res)
		}
		var u use
		if _, err := fmt.Sscan(res.Stdout, &u.bytes, &u.inodes); err != nil {
			t.Fatalf("%s: %q: %v", how, res.Stdout, err)
		}
		return took, u
	}
	hows := []string{"chown", "files", "dirs"}
	if deep {
		hows[1] = "dirs12"
	}
	for _, how := range hows[1:] {
		first, u := one(how)
		t.Logf("first %s sandbox (builds its layer): create %v, disk %d bytes, %d inodes", how, first.Round(time.Millisecond), u.bytes, u.inodes)
	}
	load0, _ := os.ReadFile("/proc/loadavg")
	times := map[string][]time.Duration{}
	disk := map[string][]use{}
	for r := range rounds {
		for i := range hows {
			how := hows[(i+r)%len(hows)]
			took, u := one(how)
			times[how] = append(times[how], took)
			disk[how] = append(disk[how], u)
		}
	}
	load, _ := os.ReadFile("/proc/loadavg")
	t.Logf("load before %s, after %s", strings.TrimSpace(string(load0)), strings.TrimSpace(string(load)))
	for _, how := range hows {
		slices.Sort(times[how])
		slices.SortFunc(disk[how], func(a, b use) int { return int(a.inodes - b.inodes) })
		n := len(times[how])
		t.Logf("%-6s n=%d create p50 %v p90 %v; disk p50 %d bytes, %d inodes (max %d)", how, n, times[how][n/2].Round(100*time.Microsecond),
			times[how][n*9/10].Round(100*time.Microsecond), disk[how][n/2].bytes, disk[how][n/2].inodes, disk[how][n-1].inodes)
	}
	p50 := func(how string) float64 { return float64(times[how][rounds/2]) }
	t.Logf("create p50 dirs/%s %.3f, dirs/chown %.3f, %s/chown %.3f", hows[1], p50("dirs")/p50(hows[1]), p50("dirs")/p50("chown"), hows[1], p50(hows[1])/p50("chown"))
}
