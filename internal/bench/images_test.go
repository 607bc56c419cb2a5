package bench

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/engine"
	"github.com/minisandbox/msb/internal/privtest"
)

// TestImages runs the images comparison for real on tiny images (a base
// of the host's bash, layers of generated files), one round: every row
// is there with sane values (B's unique files are exactly its generated
// bytes, neither store adds less than them for B), the tables render,
// and nothing is left: no fixture, store or registry dir in the work dir,
// no process running from it, no image in the bench's podman storage.
func TestImages(t *testing.T) {
	if testing.Short() {
		t.Skip("builds images and runs real sandboxes")
	}
	for _, tool := range []string{"podman", "docker-registry"} {
		if _, err := exec.LookPath(tool); err != nil {
			privtest.Skip(t, "%s is not installed", tool)
		}
	}
	exe, args := buildMSB(t)
	work := t.TempDir()
	o := ImagesOptions{Work: work, Rounds: 1, ReadyRounds: 2, BaseRootfs: bashRootfs(t), MSB: exe, MSBArgs: args,
		A:        []ImageLayer{{Files: 30, FileSize: 4096}, {Files: 3, FileSize: 300_000}},
		B:        []ImageLayer{{Files: 10, FileSize: 8192}},
		Progress: func(l string) { t.Log(time.Now().Format("15:04:05.0"), l) }}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rep, err := Images(ctx, engine.Config{StateDir: privtest.StateDir(t)}, o)
	if errors.Is(err, errSkipped) {
		privtest.Skip(t, "%v", err)
	}
	defer removePodmanStorage(t, work)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Failures) > 0 {
		t.Fatalf("failures:\n%s", strings.Join(rep.Failures, "\n"))
	}
	got := map[Key][]float64{}
	for _, s := range rep.Samples {
		if s.Measure == MeasureImages {
			got[s.Key] = append(got[s.Key], s.Value)
		}
	}
	one := func(image, m, phase string, n int) float64 {
		t.Helper()
		v := got[Key{Measure: MeasureImages, Workload: image, Method: m, Phase: phase}]
		if len(v) != n {
			t.Fatalf("%s %s %s: %d samples, want %d", image, m, phase, len(v), n)
		}
		if v[0] <= 0 {
			t.Errorf("%s %s %s: %v, want > 0", image, m, phase, v[0])
		}
		return v[0]
	}
	const bytesB = 10 * 8192
	if u := one("b", MethodLayers, PhaseUniqueFiles, 1); u != bytesB {
		t.Errorf("B's unique files: %v bytes, want %d", u, bytesB)
	}
	if own := one("b", MethodLayers, PhaseImageFiles, 1); own != bytesB {
		t.Errorf("B's own files: %v bytes, want %d", own, bytesB)
	}
	if a := one("a", MethodLayers, PhaseImageFiles, 1); a <= 30*4096+3*300_000 {
		t.Errorf("A's files: %v bytes, fewer than its layers' alone", a)
	}
	for _, m := range []string{MethodMSB, MethodPodman} {
		one("a", m, PhaseImport, o.Rounds)
		one("b", m, PhaseImport, o.Rounds)
		one("a", m, PhaseStore, o.Rounds)
		one("a", m, PhaseStoreApp, o.Rounds)
		if added := one("b", m, PhaseAddedApp, o.Rounds); added < bytesB {
			t.Errorf("%s: B added %v bytes (apparent), less than its unique files", m, added)
		}
		one("b", m, PhaseAdded, o.Rounds)
	}
	for _, m := range []string{MethodMSB, MethodMSBHostBase, MethodPodman} {
		for _, ph := range []string{"create", "answer", "ready"} {
			one("a", m, ph, o.ReadyRounds)
		}
	}
	var txt strings.Builder
	if err := rep.WriteText(&txt); err != nil || !strings.Contains(txt.String(), "issue 27's targets") || !strings.Contains(txt.String(), "disk B added, allocated") {
		t.Errorf("the summary lacks the images tables (%v):\n%s", err, txt.String())
	}
	if ents, err := os.ReadDir(filepath.Join(work, "images")); err != nil || len(ents) > 0 {
		t.Errorf("left in the work dir: %v %v", ents, err)
	}
	if out, err := exec.Command("pgrep", "-af", work).Output(); err == nil {
		t.Errorf("processes left running in the work dir (the registry?):\n%s", out)
	}
	pm, err := newPodman(ctx, filepath.Join(work, "podman"))
	if err != nil {
		t.Fatal(err)
	}
	if imgs, err := pm.out(ctx, "images", "--quiet"); err != nil || imgs != "" {
		t.Errorf("images left in the bench's podman storage: %q %v", imgs, err)
	}
}

// TestImageTargets: the images table takes p50s per image, phase and
// method, the ratio to podman's in the same image and phase only, and
// checks issue 27's targets on them: B's added disk over its unique files
// (msb's ≤ 1.1; podman's without a target), task ready on the image over
// the host base (≤ 1.1) and over podman (≤ 5%).
func TestImageTargets(t *testing.T) {
	var samples []Sample
	add := func(image, m, phase string, vals ...float64) {
		for i, v := range vals {
			samples = append(samples, Sample{Key: Key{Measure: MeasureImages, Workload: image, Method: m, Phase: phase}, Round: i, Value: v, Unit: UnitBytes})
		}
	}
	add("b", MethodLayers, PhaseUniqueFiles, 100)
	add("b", MethodMSB, PhaseAdded, 105, 120, 90)     // p50 105: met
	add("b", MethodMSB, PhaseAddedApp, 111)           // 1.11: not met
	add("b", MethodPodman, PhaseAdded, 300, 200, 250) // p50 250
	add("a", MethodMSB, "ready", 0.030, 0.020, 0.025)
	add("a", MethodMSBHostBase, "ready", 0.024)
	add("a", MethodPodman, "ready", 0.4)
	add("a", MethodMSB, PhaseImport, 4)
	samples = append(samples, Sample{Key: Key{Measure: MeasureFork, Workload: "b", Method: MethodMSB, Phase: PhaseAdded}, Value: 1e9})

	rows := imageRows(samples)
	if len(rows) != 8 || rows[0].phase != PhaseUniqueFiles || rows[1].phase != PhaseImport || rows[2].method != MethodMSB || rows[2].p50 != 105 || rows[2].p95 != 120 || rows[2].vsPodman != 105.0/250 {
		t.Fatalf("rows %+v", rows)
	}
	type check struct {
		value     float64
		met, goal bool
	}
	got := map[string]check{}
	for _, x := range imageTargets(rows) {
		got[x.what] = check{x.value, x.met, x.hasTarget}
	}
	want := map[string]check{
		"msb: disk B added, allocated / B's unique files":    {1.05, true, true},
		"msb: disk B added, apparent / B's unique files":     {1.11, false, true},
		"podman: disk B added, allocated / B's unique files": {2.5, false, false},
		"msb: task ready on A / on the host base":            {0.025 / 0.024, true, true},
		"task ready: msb on A / podman run of A":             {0.025 / 0.4, false, true},
	}
	if len(got) != len(want) {
		t.Errorf("targets %+v, want %d", got, len(want))
	}
	for what, w := range want {
		g, ok := got[what]
		if !ok || g.met != w.met || g.goal != w.goal || g.value < w.value-1e-9 || g.value > w.value+1e-9 {
			t.Errorf("%s: %+v, want %+v", what, g, w)
		}
	}
}

// TestUniqueBytes: B's unique bytes leave out the files whose content is
// in a layer of A and count a content B holds twice once; its own bytes
// count every file (a hard link once).
func TestUniqueBytes(t *testing.T) {
	dir := t.TempDir()
	write := func(p, content string) {
		t.Helper()
		p = filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a1/usr/x", "shared")          // 6
	write("a2/usr/y", "only in A")       // 9
	write("b1/opt/x", "shared")          // in A
	write("b1/opt/z", "only in B")       // 9
	write("b2/srv/z-again", "only in B") // the same content again
	write("b2/srv/w", "another")         // 7
	if err := os.Link(filepath.Join(dir, "b2/srv/w"), filepath.Join(dir, "b2/srv/w-link")); err != nil {
		t.Fatal(err)
	}
	os.Symlink("x", filepath.Join(dir, "b1/opt/link"))
	a, own, unique, err := uniqueBytes(context.Background(), []string{filepath.Join(dir, "a1"), filepath.Join(dir, "a2")},
		[]string{filepath.Join(dir, "b1"), filepath.Join(dir, "b2")})
	if err != nil {
		t.Fatal(err)
	}
	if a != 15 || own != 6+9+9+7 || unique != 9+7 {
		t.Errorf("A %d, B's own %d, B's unique %d; want 15, 31, 16", a, own, unique)
	}
}
