package bench

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/sandbox"
)

// run runs o for real with a test runtime and a fresh work dir, fails on
// any failure the report lists, writes the report and checks that nothing
// was left behind. It returns the samples counted by key, and the slots
// each key's samples ran in.
func run(t *testing.T, o Options) (*Report, map[Key]int, map[Key]map[int]bool) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs real sandboxes")
	}
	rt := testRuntime(t)
	if o.Work == "" {
		o.Work = t.TempDir()
	}
	o.Progress = func(l string) { t.Log(time.Now().Format("15:04:05.0"), l) }
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	rep, err := Run(ctx, rt, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Failures) > 0 {
		t.Fatalf("failures:\n%s", strings.Join(rep.Failures, "\n"))
	}
	if !o.Podman && !slices.ContainsFunc(rep.Skipped, func(s string) bool { return strings.HasPrefix(s, "podman:") }) {
		t.Errorf("podman's absence is not reported: skipped %v", rep.Skipped)
	}
	count := map[Key]int{}
	slots := map[Key]map[int]bool{}
	for _, s := range rep.Samples {
		if s.Value <= 0 && s.Phase != PhaseMemAvail && s.Phase != PhaseHost && s.Phase != PhaseResident && s.Measure != MeasureLoad {
			t.Errorf("sample %+v is not positive", s)
		}
		count[s.Key]++
		if slots[s.Key] == nil {
			slots[s.Key] = map[int]bool{}
		}
		slots[s.Key][s.Slot] = true
	}

	out := filepath.Join(t.TempDir(), "out")
	files, err := rep.Write(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"samples.csv", "summary.csv", "summary.txt", "summary.md", "report.json"} {
		if !slices.Contains(files, filepath.Join(out, f)) {
			t.Errorf("%s not written (wrote %v)", f, files)
		}
	}
	f, err := os.Open(filepath.Join(out, "samples.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if back, err := ReadCSV(f); err != nil || len(back) != len(rep.Samples) {
		t.Fatalf("samples.csv holds %d samples (%v), the report %d", len(back), err, len(rep.Samples))
	}

	for _, d := range []string{"tasks", "prep"} {
		if left, _ := os.ReadDir(filepath.Join(o.Work, d)); len(left) > 0 {
			t.Errorf("left behind in %s: %v", d, left)
		}
	}
	states, _ := os.ReadDir(rt.StateDir())
	for _, s := range states {
		if s.Name() != ".empty" && s.Name() != ".mnt" && !strings.HasPrefix(s.Name(), ".probed-") { // the runtime's own, made once
			t.Errorf("sandbox state left behind: %s", s.Name())
		}
	}
	return rep, count, slots
}

// wantLoad checks that the load was sampled during each measure.
func wantLoad(t *testing.T, count map[Key]int, workload string, measures ...string) {
	t.Helper()
	for _, m := range measures {
		for _, ph := range []string{PhaseLoad1, PhaseRunning} {
			if k := (Key{MeasureLoad, workload, "", ph, "", "during=" + m}); count[k] < 1 {
				t.Errorf("no load sampled during %s (%+v)", m, k)
			}
		}
	}
}

func wantSamples(t *testing.T, count map[Key]int, k Key, n int) {
	t.Helper()
	if count[k] != n {
		t.Errorf("%+v: %d samples, want %d", k, count[k], n)
	}
}

// TestRunBare runs the sandbox comparisons for real, at a tiny size,
// against the paper's mechanism and the raw shells (podman is not on the
// test machine).
func TestRunBare(t *testing.T) {
	o := Options{Workloads: []string{WorkloadBare}, Measures: []string{MeasureReady, MeasureProcess, MeasureThroughput, MeasureRoundTrip, MeasurePSS},
		Rounds: 2, Warmup: 1, Cold: true, Workers: []int{1, 2}, Duration: 400 * time.Millisecond, ThroughputRounds: 2, RoundTrips: 20, Density: 3, Idle: time.Second, IdleCommands: 2}
	o.MSB, o.MSBArgs = buildMSB(t)
	rep, count, slots := run(t, o)
	for _, m := range []string{MethodMSB, MethodPaper} {
		for _, c := range []string{Warm, Cold} {
			for _, ph := range []string{"create", "answer", "ready", "close", "cycle"} {
				wantSamples(t, count, Key{MeasureReady, WorkloadBare, m, ph, c, ""}, o.Rounds)
			}
			wantSamples(t, count, Key{MeasureReady, WorkloadBare, m, "task", c, ""}, 0) // no real task in the bare workload
			// the whole process: msb run -- true beside the paper's pipeline
			wantSamples(t, count, Key{MeasureProcess, WorkloadBare, m, PhaseRun, c, ""}, o.Rounds)
		}
		// each cold trial says how much of its files stayed resident
		wantSamples(t, count, Key{MeasureReady, WorkloadBare, m, PhaseResident, Cold, ""}, o.Rounds)
		wantSamples(t, count, Key{MeasureProcess, WorkloadBare, m, PhaseResident, Cold, ""}, o.Rounds)
		// two rounds, the order rotated: each method in two slots
		if s := slots[Key{MeasureReady, WorkloadBare, m, "ready", Warm, ""}]; len(s) != 2 {
			t.Errorf("%s ran in slots %v, want two", m, s)
		}
		for _, w := range []string{"workers=1", "workers=2"} {
			wantSamples(t, count, Key{MeasureThroughput, WorkloadBare, m, "cycle", Warm, w}, o.ThroughputRounds)
		}
		wantSamples(t, count, Key{MeasurePSS, WorkloadBare, m, PhasePSS, "", "n=3,commands=2"}, 3)
		wantSamples(t, count, Key{MeasurePSS, WorkloadBare, m, PhaseTop, "", "n=3,commands=2"}, 3)
		wantSamples(t, count, Key{MeasurePSS, WorkloadBare, m, PhaseMemAvail, "", "n=3,commands=2"}, 1)
	}
	wantSamples(t, count, Key{MeasurePSS, WorkloadBare, MethodMSB, PhaseHost, "", "n=3,commands=2"}, 1)
	// msb with its task made ahead: in the ready measure only, without
	// phases of its own (they are its making's, untimed).
	for _, c := range []string{Warm, Cold} {
		for _, ph := range []string{"create", "answer", "ready", "close", "cycle"} {
			wantSamples(t, count, Key{MeasureReady, WorkloadBare, MethodMSBSpare, ph, c, ""}, o.Rounds)
		}
		wantSamples(t, count, Key{MeasureReady, WorkloadBare, MethodMSBSpare, sandbox.PhaseSpawn, c, ""}, 0)
	}
	wantSamples(t, count, Key{MeasureThroughput, WorkloadBare, MethodMSBSpare, "cycle", Warm, "workers=1"}, 0)
	// msb's own phases, its background cleanup's included; the paper's
	// method has none.
	for _, ph := range []string{sandbox.PhaseSpawn, sandbox.PhaseMounts, sandbox.PhaseExit, sandbox.PhaseClose, sandbox.PhaseStateRm, sandbox.PhaseCleanup} {
		for _, c := range []string{Warm, Cold} {
			wantSamples(t, count, Key{MeasureReady, WorkloadBare, MethodMSB, ph, c, ""}, o.Rounds)
			wantSamples(t, count, Key{MeasureReady, WorkloadBare, MethodPaper, ph, c, ""}, 0)
		}
	}
	var txt strings.Builder
	if err := rep.WriteText(&txt); err != nil || !strings.Contains(txt.String(), "phase by phase") || !strings.Contains(txt.String(), sandbox.PhaseExit) {
		t.Errorf("the summary has no table of msb's phases (%v):\n%s", err, txt.String())
	}
	for _, m := range []string{MethodRaw, MethodMSBHost, MethodMSB, MethodPaper} {
		wantSamples(t, count, Key{MeasureRoundTrip, WorkloadBare, m, PhaseSession, Warm, ""}, o.RoundTrips)
	}
	for _, m := range []string{MethodRaw, MethodMSB} {
		wantSamples(t, count, Key{MeasureRoundTrip, WorkloadBare, m, PhaseExec, Warm, ""}, o.RoundTrips)
	}
	wantLoad(t, count, WorkloadBare, o.Measures...)
	if !strings.Contains(txt.String(), "Whole process") || !strings.Contains(txt.String(), "load during each measure") {
		t.Errorf("the summary has no whole-process or load table:\n%s", txt.String())
	}
}

// TestRunBarePodman runs the bare comparisons with podman, at a tiny size,
// on a base image imported from a root filesystem of the host's bash and
// its libraries (no image registry is reached). Without podman (or its
// OCI runtime) the run says why it skipped podman, and so does the test.
func TestRunBarePodman(t *testing.T) {
	o := Options{Workloads: []string{WorkloadBare}, Measures: []string{MeasureReady, MeasureProcess, MeasureRoundTrip},
		Rounds: 1, Cold: true, RoundTrips: 10, PodmanRoundTrips: 10, Podman: true, Work: t.TempDir()}
	o.PodmanRootfs = bashRootfs(t)
	o.MSB, o.MSBArgs = buildMSB(t)
	defer removePodmanStorage(t, o.Work)
	rep, count, _ := run(t, o)
	if rep.Machine.Podman == "" {
		t.Skipf("podman did not run: %s", strings.Join(rep.Skipped, "; "))
	}
	for _, c := range []string{Warm, Cold} {
		for _, ph := range []string{"create", "answer", "ready", "close", "cycle"} {
			wantSamples(t, count, Key{MeasureReady, WorkloadBare, MethodPodman, ph, c, ""}, o.Rounds)
		}
		wantSamples(t, count, Key{MeasureProcess, WorkloadBare, MethodPodman, PhaseRun, c, ""}, o.Rounds)
	}
	// a shell kept in the container beside podman exec per command
	wantSamples(t, count, Key{MeasureRoundTrip, WorkloadBare, MethodPodman, PhaseSession, Warm, ""}, o.RoundTrips)
	wantSamples(t, count, Key{MeasureRoundTrip, WorkloadBare, MethodPodman, PhaseExec, Warm, ""}, o.PodmanRoundTrips)
}

// bashRootfs is a root filesystem holding the host's bash and the
// libraries it loads: enough for the bare workload's shell.
func bashRootfs(t *testing.T) string {
	t.Helper()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatal(err)
	}
	bash, _ = filepath.EvalSymlinks(bash)
	out, err := exec.Command("ldd", bash).Output()
	if err != nil {
		t.Fatalf("ldd %s: %v", bash, err)
	}
	files := []string{bash}
	for _, line := range strings.Split(string(out), "\n") {
		for _, f := range strings.Fields(line) {
			if strings.HasPrefix(f, "/") {
				files = append(files, f)
			}
		}
	}
	dir := t.TempDir()
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		os.MkdirAll(filepath.Join(dir, filepath.Dir(f)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if target, err := os.Readlink("/bin"); err == nil { // merged /usr, as on the host
		os.Symlink(target, filepath.Join(dir, "bin"))
	}
	// podman run BASE true runs a true of the shell's own
	if err := os.WriteFile(filepath.Join(dir, filepath.Dir(bash), "true"), []byte("#!"+bash+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// removePodmanStorage removes the images the run's podman kept in its
// work dir, through podman, which unmounts what it mounted.
func removePodmanStorage(t *testing.T, work string) {
	t.Helper()
	pm, err := newPodman(context.Background(), filepath.Join(work, "podman"))
	if err != nil {
		return
	}
	if _, err := pm.out(context.Background(), "rmi", "--all", "--force"); err != nil {
		t.Errorf("removing podman's storage: %v", err)
	}
}

// TestRunSynthetic runs the repository comparisons for real on a tiny
// generated repository: task ready with the real task's command, disk,
// and first-time preparation (which builds two more venvs).
func TestRunSynthetic(t *testing.T) {
	o := Options{Workloads: []string{WorkloadSynthetic}, Measures: []string{MeasureReady, MeasureDisk, MeasurePrep},
		Rounds: 1, Cold: true, Instances: 2, DiskNs: []int{1, 2}, PrepInstances: 2, Files: 30, FileSize: 256}
	rep, count, _ := run(t, o)
	if len(rep.Workloads) != 1 || rep.Workloads[0].Instances != 2 || !strings.Contains(rep.Workloads[0].Task, "import pkg00") {
		t.Errorf("workloads %+v", rep.Workloads)
	}
	for _, m := range []string{MethodMSB, MethodPaper} {
		for _, c := range []string{Warm, Cold} {
			for _, ph := range []string{"create", "answer", "ready", "task", "close", "cycle"} {
				wantSamples(t, count, Key{MeasureReady, WorkloadSynthetic, m, ph, c, ""}, o.Rounds)
			}
		}
		for _, n := range []string{"n=1", "n=2"} {
			// like for like both ways: without and with each method's system
			for _, ph := range []string{PhaseTotal, PhaseTotalSystem, PhaseSystem, PhaseTasks} {
				wantSamples(t, count, Key{MeasureDisk, WorkloadSynthetic, m, ph, "", n}, 1)
			}
		}
		wantSamples(t, count, Key{MeasurePrep, WorkloadSynthetic, m, PhaseEnv, "", ""}, 1)
		wantSamples(t, count, Key{MeasurePrep, WorkloadSynthetic, m, PhaseInstance, "", ""}, 1)
	}
	wantSamples(t, count, Key{MeasureDisk, WorkloadSynthetic, MethodMSB, PhaseLayers, "", "n=2"}, 1)
	wantSamples(t, count, Key{MeasureDisk, WorkloadSynthetic, MethodMSB, PhaseMirror, "", "n=2"}, 1)
	wantSamples(t, count, Key{MeasureDisk, WorkloadSynthetic, MethodPaper, PhaseTarballs, "", "n=2"}, 1)
	wantLoad(t, count, WorkloadSynthetic, o.Measures...)
}
