package bench

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// MeasureLoad holds the machine's load, sampled throughout each measure
// (Param during=MEASURE): a run on a shared machine says when other work
// competed with it, instead of only at its start and end.
const MeasureLoad = "load"

// Load phases.
const (
	PhaseLoad1   = "load1"   // the 1-minute load average
	PhaseRunning = "running" // runnable tasks right now (procs_running, this run's own included)
)

// loadInterval is how often the load is sampled during a measure.
const loadInterval = 500 * time.Millisecond

// sampleLoad samples the load every loadInterval until the returned stop
// is called; stop records the samples and notes the measure as noisy when
// the 1-minute load average exceeded the number of CPUs at any sample:
// then more work was runnable than there were cores, and its times
// include waiting for one.
func (b *bencher) sampleLoad(measure, workload string) (stop func()) {
	done := make(chan struct{})
	out := make(chan []Sample)
	key := func(phase string) Key {
		return Key{Measure: MeasureLoad, Workload: workload, Phase: phase, Param: "during=" + measure}
	}
	go func() {
		var ss []Sample
		tick := time.NewTicker(loadInterval)
		defer tick.Stop()
		for i := 0; ; i++ {
			if l1, running, ok := readLoad(); ok {
				ss = append(ss, Sample{Key: key(PhaseLoad1), Round: i, Value: l1, Unit: UnitTasks},
					Sample{Key: key(PhaseRunning), Round: i, Value: running, Unit: UnitTasks})
			}
			select {
			case <-done:
				out <- ss
				return
			case <-tick.C:
			}
		}
	}()
	return func() {
		close(done)
		ss := <-out
		b.add(ss...)
		if peak, noisy := noisyLoad(ss, runtime.NumCPU()); noisy {
			b.note(noteInfo, "noisy: during %s of %s the 1-minute load average reached %.2f on %d CPUs: more work was runnable than there were cores, and the times include waiting for one (ratios within the run still compare like with like)",
				measure, workload, peak, runtime.NumCPU())
		}
	}
}

// noisyLoad is the peak 1-minute load average of samples and whether it
// exceeded cpus.
func noisyLoad(samples []Sample, cpus int) (peak float64, noisy bool) {
	for _, s := range samples {
		if s.Phase == PhaseLoad1 && s.Value > peak {
			peak = s.Value
		}
	}
	return peak, peak > float64(cpus)
}

// readLoad reads the 1-minute load average (/proc/loadavg) and the
// number of runnable tasks (/proc/stat's procs_running).
func readLoad() (load1, running float64, ok bool) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, 0, false
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, 0, false
	}
	if load1, err = strconv.ParseFloat(f[0], 64); err != nil {
		return 0, 0, false
	}
	st, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, false
	}
	for _, line := range strings.Split(string(st), "\n") {
		if v, ok := strings.CutPrefix(line, "procs_running "); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			return load1, float64(n), err == nil
		}
	}
	return 0, 0, false
}

// loadCells are a load summary's median and peak.
func loadCells(s Summary) (string, string) {
	return fmt.Sprintf("%.2f", s.P50), fmt.Sprintf("%.2f", s.Max)
}
