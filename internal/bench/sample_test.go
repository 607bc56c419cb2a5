package bench

import (
	"bytes"
	"math"
	"slices"
	"strings"
	"testing"
)

func sample(method, phase string, v float64) Sample {
	return Sample{Key: Key{Measure: MeasureReady, Workload: "w", Method: method, Phase: phase, Cache: Warm}, Value: v, Unit: UnitSeconds}
}

func TestCSVRoundTrip(t *testing.T) {
	in := []Sample{
		{Key: Key{MeasureReady, "requests", MethodMSB, "create", Cold, ""}, Round: 3, Slot: 1, Value: 0.0123456789, Unit: UnitSeconds},
		{Key: Key{MeasureDisk, "synthetic", MethodPaper, PhaseTotal, "", "n=10"}, Round: -1, Value: 1 << 30, Unit: UnitBytes},
		{Key: Key{MeasureRoundTrip, "bare", MethodRaw, PhaseSession, Warm, "a,b \"quoted\""}, Value: 1e-6, Unit: UnitSeconds},
	}
	var buf bytes.Buffer
	if err := WriteCSV(&buf, in); err != nil {
		t.Fatal(err)
	}
	if first, _, _ := strings.Cut(buf.String(), "\n"); first != strings.Join(csvHeader, ",") {
		t.Fatalf("header %q", first)
	}
	out, err := ReadCSV(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(in, out) {
		t.Fatalf("round trip:\n%+v\n%+v", in, out)
	}
	if _, err := ReadCSV(strings.NewReader("a,b\n1,2\n")); err == nil {
		t.Fatal("a CSV with another header was read")
	}
}

func TestSummariesRatios(t *testing.T) {
	var s []Sample
	for _, v := range []float64{1, 2, 3} {
		s = append(s, sample(MethodMSB, "ready", v/100), sample(MethodPodman, "ready", v), sample(MethodPaper, "ready", v*4/100))
	}
	s = append(s, sample(MethodPodman, "close", 50)) // another phase: not a baseline for ready
	sums := Summaries(s)
	by := map[Key]Summary{}
	for _, x := range sums {
		by[x.Key] = x
	}
	msb := by[sample(MethodMSB, "ready", 0).Key]
	if msb.N != 3 || msb.P50 != 0.02 || msb.Min != 0.01 || msb.Max != 0.03 {
		t.Fatalf("msb summary %+v", msb)
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-12 }
	if !near(msb.Ratio[MethodPodman], 0.01) || !near(msb.Ratio[MethodPaper], 0.25) {
		t.Fatalf("msb ratios %v", msb.Ratio)
	}
	if r := by[sample(MethodPodman, "ready", 0).Key].Ratio; len(r) != 1 || !near(r[MethodPaper], 25) {
		t.Fatalf("podman ratios %v (only the paper is its baseline)", r)
	}
	if r := by[sample(MethodPodman, "close", 0).Key].Ratio; len(r) != 0 {
		t.Fatalf("close is compared with nothing, got %v", r)
	}
	if sums[0].Key != s[0].Key || sums[3].Phase != "close" {
		t.Fatalf("summaries not in order of first appearance: %v", sums)
	}
}

func TestNoisyLoad(t *testing.T) {
	s := func(phase string, v float64) Sample {
		return Sample{Key: Key{Measure: MeasureLoad, Phase: phase}, Value: v, Unit: UnitTasks}
	}
	quiet := []Sample{s(PhaseLoad1, 0.5), s(PhaseRunning, 9), s(PhaseLoad1, 2)}
	if peak, noisy := noisyLoad(quiet, 2); noisy || peak != 2 {
		t.Errorf("load 0.5 then 2 on 2 CPUs: peak %v, noisy %v; want 2, quiet (runnable counts are not the load average)", peak, noisy)
	}
	if peak, noisy := noisyLoad(append(quiet, s(PhaseLoad1, 2.5)), 2); !noisy || peak != 2.5 {
		t.Errorf("a load of 2.5 on 2 CPUs mid-run: peak %v, noisy %v; want 2.5, noisy", peak, noisy)
	}
}
