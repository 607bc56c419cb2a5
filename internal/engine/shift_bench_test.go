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
)

// shiftBenchEnv runs TestImageShiftedBench (rootless, as privtest's user):
// MSB_SHIFT_BENCH=ROUNDS.
const shiftBenchEnv = "MSB_SHIFT_BENCH"

// TestImageShiftedBench measures sandboxes on an image whose user owns
// 50 MiB (200 files of 256 KiB), rootless: created with the shifted layer
// ("shifted") and with init's chowns ("chown", the runtime without its
// Shifter), interleaved round by round, the order swapped each round;
// create is CreateSandbox's time, disk the writable layer's use after
// create (statvfs of the root inside). The first shifted sandbox, which
// builds the layer, is reported apart. It runs only with MSB_SHIFT_BENCH
// set (to the number of rounds); as root it reruns itself rootless.
func TestImageShiftedBench(t *testing.T) {
	rounds, _ := strconv.Atoi(os.Getenv(shiftBenchEnv))
	if rounds <= 0 {
		t.Skip(shiftBenchEnv + " is not set: a benchmark")
	}
	if os.Geteuid() == 0 {
		privtest.UnprivilegedEnv(t, "^TestImageShiftedBench$", shiftBenchEnv+"="+strconv.Itoa(rounds))
		return
	}
	g := generated(t)
	e := openEngine(t, "", nil)
	ctx := context.Background()
	root := demotest.ImageRootfs(t, g.RepoDir, g.Instances[0].BaseCommit, g.PyVersion)
	home := filepath.Join(root, "home", "calc")
	if err := os.MkdirAll(filepath.Join(home, "tree"), 0o755); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 256<<10)
	for i := range 200 {
		rand.Read(buf)
		if err := os.WriteFile(filepath.Join(home, "tree", fmt.Sprintf("f%03d", i)), buf, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	passwd := "root:x:0:0::/root:/bin/bash\ncalc:x:1000:1000::/home/calc:/bin/bash\n"
	if err := os.WriteFile(filepath.Join(root, "etc", "passwd"), []byte(passwd), 0o644); err != nil {
		t.Fatal(err)
	}
	img := demotest.ImageOwned(t, root, func(name string) (int, int) {
		if name == "home/calc" || strings.HasPrefix(name, "home/calc/") {
			return 1000, 1000
		}
		return 0, 0
	})
	img = asCalc(t, img)
	const ref = "example.com/msb-test/engine-shift-bench:1"
	importImage(t, e, ref, img)
	shifter := envcache.Shifter(e.cache.st())
	defer e.rt.SetShifter(shifter)
	const probe = `python3 -c 'import os; s = os.statvfs("/"); print((s.f_blocks - s.f_bfree) * s.f_frsize)'`
	one := func(how string) (time.Duration, int64) {
		if how == "shifted" {
			e.rt.SetShifter(shifter)
		} else {
			e.rt.SetShifter(nil)
		}
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
		used, err := strconv.ParseInt(strings.TrimSpace(res.Stdout), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return took, used
	}
	first, firstUsed := one("shifted")
	times := map[string][]time.Duration{}
	disk := map[string][]int64{}
	for r := range rounds {
		order := []string{"shifted", "chown"}
		if r%2 == 1 {
			slices.Reverse(order)
		}
		for _, how := range order {
			took, used := one(how)
			times[how] = append(times[how], took)
			disk[how] = append(disk[how], used)
		}
	}
	load, _ := os.ReadFile("/proc/loadavg")
	t.Logf("first shifted sandbox (builds the layer): create %v, disk %d bytes; load %s", first.Round(time.Millisecond), firstUsed, strings.TrimSpace(string(load)))
	for _, how := range []string{"shifted", "chown"} {
		slices.Sort(times[how])
		slices.Sort(disk[how])
		n := len(times[how])
		t.Logf("%-8s n=%d create p50 %v p90 %v; disk p50 %d bytes max %d", how, n, times[how][n/2].Round(time.Millisecond),
			times[how][n*9/10].Round(time.Millisecond), disk[how][n/2], disk[how][n-1])
	}
	t.Logf("create p50 shifted/chown %.3f", float64(times["shifted"][rounds/2])/float64(times["chown"][rounds/2]))
}
