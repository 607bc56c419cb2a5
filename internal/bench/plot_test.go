package bench

import (
	"bytes"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fakeRun is a set of samples shaped like a run's (values made up, not
// measured: the tests check rendering, not speed).
func fakeRun() []Sample {
	var s []Sample
	add := func(k Key, unit string, vs ...float64) {
		for i, v := range vs {
			s = append(s, Sample{Key: k, Round: i, Value: v, Unit: unit})
		}
	}
	for _, m := range []struct {
		name  string
		scale float64
	}{{MethodMSB, 1}, {MethodPaper, 30}, {MethodPodman, 10}} {
		for _, c := range []string{Warm, Cold} {
			for _, ph := range []string{"create", "answer", "ready", "close", "cycle"} {
				add(Key{MeasureReady, "requests", m.name, ph, c, ""}, UnitSeconds, 0.010*m.scale, 0.012*m.scale, 0.020*m.scale)
			}
		}
		for _, w := range []string{"workers=1", "workers=2"} {
			add(Key{MeasureThroughput, "requests", m.name, "cycle", Warm, w}, UnitPerSec, 50/m.scale, 60/m.scale)
		}
		for _, n := range []int{1, 10, 50} {
			add(Key{MeasureDisk, "requests", m.name, PhaseTotal, "", fmt.Sprintf("n=%d", n)}, UnitBytes, float64(n)*m.scale*(1<<20))
		}
		add(Key{MeasurePSS, WorkloadBare, m.name, PhasePSS, "", "n=200"}, UnitBytes, 1<<20, 1.1*(1<<20))
		add(Key{MeasurePrep, "requests", m.name, PhaseEnv, "", ""}, UnitSeconds, 20*m.scale)
		add(Key{MeasurePrep, "requests", m.name, PhaseInstance, "", ""}, UnitSeconds, 0.5*m.scale, 0.6*m.scale)
	}
	add(Key{MeasureRoundTrip, WorkloadBare, MethodRaw, PhaseSession, Warm, ""}, UnitSeconds, 100e-6, 120e-6)
	add(Key{MeasureRoundTrip, WorkloadBare, MethodMSB, PhaseSession, Warm, ""}, UnitSeconds, 300e-6, 320e-6)
	add(Key{MeasureRoundTrip, WorkloadBare, MethodMSB, PhaseExec, Warm, ""}, UnitSeconds, 3e-3, 4e-3)
	return s
}

func TestPlotWritesPNGs(t *testing.T) {
	dir := t.TempDir()
	files, err := Plot(fakeRun(), dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		names = append(names, filepath.Base(f))
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("%s is not a PNG: %v", f, err)
		}
		if r := img.Bounds(); r.Dx() < 400 || r.Dy() < 200 {
			t.Fatalf("%s is %v", f, r)
		}
	}
	want := []string{"ready-requests-warm.png", "ready-requests-cold.png", "roundtrip-session.png", "roundtrip-exec.png",
		"throughput-requests.png", "disk-requests.png", "pss-bare.png"}
	for _, w := range want {
		if !slices.Contains(names, w) {
			t.Errorf("no %s among %v", w, names)
		}
	}
	if len(names) != len(want) {
		t.Errorf("plots %v, want %v", names, want)
	}
}

func TestPlotWithoutSamples(t *testing.T) {
	files, err := Plot(nil, t.TempDir())
	if err != nil || len(files) != 0 {
		t.Fatalf("Plot(nil) = %v, %v", files, err)
	}
}

func TestTables(t *testing.T) {
	r := &Report{Samples: fakeRun(), Workloads: []WorkloadInfo{{Name: "requests", Repo: "psf/requests", Instances: 10, Answer: "cd /testbed", Task: "true"}},
		Failures: []string{"podman: something"}}
	var txt, md bytes.Buffer
	r.WriteText(&txt)
	r.WriteMarkdown(&md)
	for _, want := range []string{
		"Task ready, warm", "Task ready, cold", "Throughput", "Round trip", "Idle memory", "Disk while N tasks", "Disk per extra instance", "First-time preparation",
		"FAILED:", "podman: something",
	} {
		if !strings.Contains(txt.String(), want) || !strings.Contains(md.String(), want) {
			t.Errorf("%q missing from the text or markdown report", want)
		}
	}
	// msb's ready p50 is 12 ms, podman's 120 ms, the paper's 360 ms
	if !strings.Contains(txt.String(), "12.0 ms") || !strings.Contains(txt.String(), "10.0%") || !strings.Contains(txt.String(), "3.3%") {
		t.Errorf("ready row of msb wrong:\n%s", txt.String())
	}
	if !strings.Contains(md.String(), "| requests | msb | 3 | 12.0 ms |") {
		t.Errorf("markdown ready row of msb wrong:\n%s", md.String())
	}
	// per extra instance between n=10 and n=50: msb 1 MiB, podman 10 MiB
	if !strings.Contains(md.String(), "| requests | msb | 1.00 MiB |") || !strings.Contains(md.String(), "| requests | podman | 10.00 MiB |") {
		t.Errorf("per-instance disk wrong:\n%s", md.String())
	}
}

func TestFormat(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		unit string
		want string
	}{
		{450e-6, UnitSeconds, "450 µs"}, {4.5e-3, UnitSeconds, "4.50 ms"}, {0.2345, UnitSeconds, "234.5 ms"}, {2.5, UnitSeconds, "2.50 s"},
		{3 << 20, UnitBytes, "3.00 MiB"}, {58.25, UnitPerSec, "58.2/s"},
	} {
		if got := fmtValue(tc.v, tc.unit); got != tc.want {
			t.Errorf("fmtValue(%v, %s) = %q, want %q", tc.v, tc.unit, got, tc.want)
		}
	}
	if fmtRatio(0.1234) != "12.3%" || fmtRatio(14.5) != "14.50×" {
		t.Errorf("fmtRatio: %s %s", fmtRatio(0.1234), fmtRatio(14.5))
	}
}
