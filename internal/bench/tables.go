package bench

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// table is one rendered comparison.
type table struct {
	title  string
	header []string
	rows   [][]string
}

// methodOrder is the order methods appear in tables.
var methodOrder = []string{MethodMSB, MethodMSBSpare, MethodMSBAPI, MethodMSBHost, MethodPaper, MethodPodman, MethodRaw}

// view indexes a run's summaries.
type view struct {
	by        map[Key]Summary
	workloads []string
	params    map[string][]string // measure → params, in order of appearance
	steps     []string            // msb's own phases of the ready measure (sandbox.Phase), in order
}

func newView(samples []Sample) *view {
	v := &view{by: map[Key]Summary{}, params: map[string][]string{}}
	for _, s := range samples {
		if s.Measure == MeasureReady && strings.Contains(s.Phase, ".") && !slices.Contains(v.steps, s.Phase) {
			v.steps = append(v.steps, s.Phase)
		}
	}
	for _, s := range Summaries(samples) {
		v.by[s.Key] = s
		if !slices.Contains(v.workloads, s.Workload) {
			v.workloads = append(v.workloads, s.Workload)
		}
		if s.Param != "" && !slices.Contains(v.params[s.Measure], s.Param) {
			v.params[s.Measure] = append(v.params[s.Measure], s.Param)
		}
	}
	return v
}

func (v *view) get(k Key) (Summary, bool) { s, ok := v.by[k]; return s, ok }

// methods are the methods with a summary for k (method ignored), in
// methodOrder.
func (v *view) methods(k Key) []string {
	var out []string
	for _, m := range methodOrder {
		k.Method = m
		if _, ok := v.by[k]; ok {
			out = append(out, m)
		}
	}
	return out
}

// cell is the p50 (or p95) of k, formatted, or "-".
func (v *view) cell(k Key, p95 bool) string {
	s, ok := v.by[k]
	if !ok {
		return "-"
	}
	if p95 {
		return fmtValue(s.P95, s.Unit)
	}
	return fmtValue(s.P50, s.Unit)
}

func (v *view) ratio(k Key, baseline string) string {
	s, ok := v.by[k]
	if !ok || k.Method == baseline {
		return "-"
	}
	r, ok := s.Ratio[baseline]
	if !ok {
		return "-"
	}
	return fmtRatio(r)
}

func fmtValue(x float64, unit string) string {
	switch unit {
	case UnitSeconds:
		return fmtDuration(time.Duration(x * float64(time.Second)))
	case UnitBytes:
		return fmt.Sprintf("%.2f MiB", x/(1<<20))
	case UnitPerSec:
		return fmt.Sprintf("%.1f/s", x)
	}
	return strconv.FormatFloat(x, 'g', 4, 64) + " " + unit
}

func fmtDuration(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%.0f µs", float64(d)/1e3)
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2f ms", float64(d)/1e6)
	case d < time.Second:
		return fmt.Sprintf("%.1f ms", float64(d)/1e6)
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}

// fmtRatio writes r as a percentage below 1 and a multiple above.
func fmtRatio(r float64) string {
	if r < 1 {
		return fmt.Sprintf("%.1f%%", 100*r)
	}
	return fmt.Sprintf("%.2f×", r)
}

// tables renders every measure that has samples.
func (r *Report) tables() []table {
	v := newView(r.Samples)
	out := goalsTable(r.Goals)
	for _, c := range []string{Warm, Cold} {
		out = append(out, v.readyTable(c)...)
	}
	for _, c := range []string{Warm, Cold} {
		out = append(out, v.stepTable(c)...)
	}
	out = append(out, v.processTable()...)
	out = append(out, v.throughputTable()...)
	out = append(out, v.roundTripTable()...)
	out = append(out, v.pssTable()...)
	out = append(out, v.diskTable()...)
	out = append(out, v.prepTable()...)
	out = append(out, forkTables(r.Samples)...)
	out = append(out, imagesTables(r.Samples)...)
	out = append(out, v.loadTable()...)
	return out
}

func (v *view) readyTable(cache string) []table {
	t := table{title: "Task ready, " + cache + ": create, the shell the task keeps answers its first command (ready = create + answer), the real task's first command, close: the whole teardown, msb's background cleanup included (cycle = all four); p50 unless marked; a ratio is the row's p50 over the baseline's",
		header: []string{"workload", "method", "n", "ready", "ready p95", "create", "answer", "task", "close", "cycle", "ready vs podman", "ready vs paper", "cycle vs podman", "cycle vs paper"}}
	if cache == Cold {
		t.header = append(t.header, "resident after drop p95")
	}
	for _, w := range v.workloads {
		k := Key{Measure: MeasureReady, Workload: w, Phase: "ready", Cache: cache}
		for _, m := range v.methods(k) {
			k.Method = m
			ph := func(p string) Key { q := k; q.Phase = p; return q }
			s, _ := v.get(k)
			t.rows = append(t.rows, []string{w, m, strconv.Itoa(s.N), v.cell(k, false), v.cell(k, true), v.cell(ph("create"), false), v.cell(ph("answer"), false),
				v.cell(ph("task"), false), v.cell(ph("close"), false), v.cell(ph("cycle"), false), v.ratio(k, MethodPodman), v.ratio(k, MethodPaper),
				v.ratio(ph("cycle"), MethodPodman), v.ratio(ph("cycle"), MethodPaper)})
			if cache == Cold {
				last := &t.rows[len(t.rows)-1]
				*last = append(*last, v.cell(ph(PhaseResident), true))
			}
		}
	}
	return nonEmpty(t)
}

// stepTable breaks msb's create and close down into the sandbox's own
// phases (sandbox.Timings): close.* is the caller's path, cleanup.* what
// runs in the background after Close returned. Phases overlap (see
// sandbox.Phase), so they do not add up to the totals.
func (v *view) stepTable(cache string) []table {
	t := table{title: "msb's create and close, phase by phase, " + cache + " (sandbox.Timings; phases overlap: create.attach runs during create.init-mounts; cleanup.* runs after Close returned)",
		header: []string{"workload", "phase", "n", "p50", "p95", "mean"}}
	for _, w := range v.workloads {
		for _, ph := range v.steps {
			k := Key{Measure: MeasureReady, Workload: w, Method: MethodMSB, Phase: ph, Cache: cache}
			if s, ok := v.get(k); ok {
				t.rows = append(t.rows, []string{w, ph, strconv.Itoa(s.N), v.cell(k, false), v.cell(k, true), fmtValue(s.Mean, s.Unit)})
			}
		}
	}
	return nonEmpty(t)
}

// processTable is the whole-process comparison: one command that makes a
// task, runs true in it, removes it and exits.
func (v *view) processTable() []table {
	t := table{title: "Whole process: one command makes a task, runs `true` in it, removes it and exits (msb: `msb run -- true`; paper: its task dir, unshare + binds + chroot /bin/true, rm -rf; podman: `podman run --rm --network none BASE true`); p50 unless marked",
		header: []string{"workload", "method", "n", "warm", "warm p95", "cold", "cold resident after drop p95", "warm vs podman", "warm vs paper", "cold vs podman", "cold vs paper"}}
	for _, w := range v.workloads {
		k := Key{Measure: MeasureProcess, Workload: w, Phase: PhaseRun, Cache: Warm}
		for _, m := range v.methods(k) {
			k.Method = m
			c := k
			c.Cache = Cold
			r := c
			r.Phase = PhaseResident
			s, _ := v.get(k)
			t.rows = append(t.rows, []string{w, m, strconv.Itoa(s.N), v.cell(k, false), v.cell(k, true), v.cell(c, false), v.cell(r, true),
				v.ratio(k, MethodPodman), v.ratio(k, MethodPaper), v.ratio(c, MethodPodman), v.ratio(c, MethodPaper)})
		}
	}
	return nonEmpty(t)
}

// loadTable is the machine's load during each measure, sampled every
// loadInterval.
func (v *view) loadTable() []table {
	t := table{title: "The machine's load during each measure (sampled every 0.5 s; noisy: the 1-minute load average above the CPU count)",
		header: []string{"workload", "measure", "samples", "load1 p50", "load1 max", "runnable p50", "runnable max"}}
	for _, w := range v.workloads {
		for _, p := range v.params[MeasureLoad] {
			k := Key{Measure: MeasureLoad, Workload: w, Phase: PhaseLoad1, Param: p}
			s, ok := v.get(k)
			if !ok {
				continue
			}
			r := k
			r.Phase = PhaseRunning
			rs, _ := v.get(r)
			l50, lmax := loadCells(s)
			r50, rmax := loadCells(rs)
			t.rows = append(t.rows, []string{w, strings.TrimPrefix(p, "during="), strconv.Itoa(s.N), l50, lmax, r50, rmax})
		}
	}
	return nonEmpty(t)
}

func (v *view) throughputTable() []table {
	params := v.params[MeasureThroughput]
	t := table{title: "Throughput: tasks created, answered by the shell they keep and closed (the whole teardown) per second (p50 over interleaved slices)", header: []string{"workload", "method"}}
	for _, p := range params {
		t.header = append(t.header, p)
	}
	if len(params) > 0 {
		last := params[len(params)-1]
		t.header = append(t.header, "vs podman ("+last+")", "vs paper ("+last+")")
	}
	for _, w := range v.workloads {
		k := Key{Measure: MeasureThroughput, Workload: w, Phase: "cycle", Cache: Warm}
		var ms []string
		for _, p := range params {
			k.Param = p
			for _, m := range v.methods(k) {
				if !slices.Contains(ms, m) {
					ms = append(ms, m)
				}
			}
		}
		for _, m := range ms {
			k.Method = m
			row := []string{w, m}
			for _, p := range params {
				k.Param = p
				row = append(row, v.cell(k, false))
			}
			row = append(row, v.ratio(k, MethodPodman), v.ratio(k, MethodPaper))
			t.rows = append(t.rows, row)
		}
	}
	return nonEmpty(t)
}

func (v *view) roundTripTable() []table {
	t := table{title: "Round trip of `true`: in a persistent shell (session) and in a new shell (exec)",
		header: []string{"workload", "kind", "method", "n", "p50", "p95", "mean", "vs raw"}}
	for _, w := range v.workloads {
		for _, ph := range []string{PhaseSession, PhaseExec} {
			k := Key{Measure: MeasureRoundTrip, Workload: w, Phase: ph, Cache: Warm}
			for _, m := range v.methods(k) {
				k.Method = m
				s, _ := v.get(k)
				t.rows = append(t.rows, []string{w, ph, m, strconv.Itoa(s.N), v.cell(k, false), v.cell(k, true), fmtValue(s.Mean, s.Unit), v.ratio(k, MethodRaw)})
			}
		}
	}
	return nonEmpty(t)
}

func (v *view) pssTable() []table {
	t := table{title: "Idle memory per task with a shell (p50 over the tasks held at once)",
		header: []string{"workload", "tasks", "method", "PSS", "PSS p95", "root process", "MemAvailable drop", "msb host side", "vs podman", "vs paper"}}
	for _, w := range v.workloads {
		for _, p := range v.params[MeasurePSS] {
			k := Key{Measure: MeasurePSS, Workload: w, Phase: PhasePSS, Param: p}
			for _, m := range v.methods(k) {
				k.Method = m
				ph := func(p string) Key { q := k; q.Phase = p; return q }
				tasks := strings.TrimPrefix(p, "n=")
				if n, c, ok := strings.Cut(tasks, ",commands="); ok {
					tasks = n + " after " + c + " commands"
				}
				t.rows = append(t.rows, []string{w, tasks, m, v.cell(k, false), v.cell(k, true), v.cell(ph(PhaseTop), false),
					v.cell(ph(PhaseMemAvail), false), v.cell(ph(PhaseHost), false), v.ratio(k, MethodPodman), v.ratio(k, MethodPaper)})
			}
		}
	}
	return nonEmpty(t)
}

func (v *view) diskTable() []table {
	t := table{title: "Disk while N tasks of N instances exist (each inode once); like for like both ways: total leaves out every method's base system, total+system counts each one's (podman's base image; the host's system dirs msb and the paper bind)",
		header: []string{"workload", "N", "method", "total", "total+system", "parts", "vs podman", "vs paper", "+system vs podman", "+system vs paper"}}
	extra := table{title: "Disk per extra instance (between the two largest N)", header: []string{"workload", "method", "per instance"}}
	parts := []string{PhaseLayers, PhaseMirror, PhaseTarballs, PhaseImages, PhaseTasks, PhaseSystem}
	for _, w := range v.workloads {
		params := v.params[MeasureDisk]
		for _, p := range params {
			k := Key{Measure: MeasureDisk, Workload: w, Phase: PhaseTotal, Param: p}
			for _, m := range v.methods(k) {
				k.Method = m
				var ps []string
				for _, ph := range parts {
					q := k
					q.Phase = ph
					if s, ok := v.get(q); ok {
						ps = append(ps, ph+" "+fmtValue(s.P50, s.Unit))
					}
				}
				ks := k
				ks.Phase = PhaseTotalSystem
				t.rows = append(t.rows, []string{w, strings.TrimPrefix(p, "n="), m, v.cell(k, false), v.cell(ks, false), strings.Join(ps, ", "),
					v.ratio(k, MethodPodman), v.ratio(k, MethodPaper), v.ratio(ks, MethodPodman), v.ratio(ks, MethodPaper)})
			}
		}
		if len(params) < 2 {
			continue
		}
		p1, p2 := params[len(params)-2], params[len(params)-1]
		n1, _ := strconv.Atoi(strings.TrimPrefix(p1, "n="))
		n2, _ := strconv.Atoi(strings.TrimPrefix(p2, "n="))
		k := Key{Measure: MeasureDisk, Workload: w, Phase: PhaseTotal, Param: p2}
		for _, m := range v.methods(k) {
			k.Method, k.Param = m, p2
			s2, ok2 := v.get(k)
			k.Param = p1
			s1, ok1 := v.get(k)
			if ok1 && ok2 && n2 > n1 {
				extra.rows = append(extra.rows, []string{w, m, fmtValue((s2.P50-s1.P50)/float64(n2-n1), UnitBytes)})
			}
		}
	}
	return nonEmpty(t, extra)
}

func (v *view) prepTable() []table {
	t := table{title: "First-time preparation: the environment with the first instance, then each further instance",
		header: []string{"workload", "method", "env + first instance", "further instance p50", "env vs podman", "env vs paper", "instance vs podman", "instance vs paper"}}
	for _, w := range v.workloads {
		k := Key{Measure: MeasurePrep, Workload: w, Phase: PhaseEnv}
		for _, m := range v.methods(k) {
			k.Method = m
			q := k
			q.Phase = PhaseInstance
			t.rows = append(t.rows, []string{w, m, v.cell(k, false), v.cell(q, false), v.ratio(k, MethodPodman), v.ratio(k, MethodPaper),
				v.ratio(q, MethodPodman), v.ratio(q, MethodPaper)})
		}
	}
	base := table{title: "podman's base image, made once per machine (not per environment)", header: []string{"step", "time"}}
	for _, ph := range []string{"base-rootfs", "base-import"} {
		k := Key{Measure: MeasurePrep, Workload: WorkloadBare, Method: MethodPodman, Phase: ph}
		if _, ok := v.get(k); ok {
			base.rows = append(base.rows, []string{ph, v.cell(k, false)})
		}
	}
	return nonEmpty(t, base)
}

func nonEmpty(ts ...table) []table {
	var out []table
	for _, t := range ts {
		if len(t.rows) > 0 {
			out = append(out, t)
		}
	}
	return out
}
