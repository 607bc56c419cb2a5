package bench

import (
	"context"
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"github.com/minisandbox/msb/internal/client"
	"github.com/minisandbox/msb/internal/sandbox"
)

// MeasureAPIReady is a task ready through the daemon's API (Goals):
// create from a cached instance → its first command answered, without
// and with a spare (methods msb-api, msb-api-spare), in a fresh bash
// (phase exec) or in the session the create opened (phase session).
const MeasureAPIReady = "api-ready"

// MethodMSBAPISpare is msb-api on a daemon with a spare ready (msb serve
// --spares 1): the api-ready measure only.
const MethodMSBAPISpare = "msb-api-spare"

// MeasureCache is the size on disk of the msb cache a goals run is
// pointed at (phase total), each inode once.
const MeasureCache = "cache"

// GoalsOptions are a run of `msb bench goals`: issue 32's table in one run.
type GoalsOptions struct {
	// Options size the sandbox comparisons of the bare workload (ready
	// with msb, msb-spare, the paper and podman; the whole process;
	// throughput with msb-api beside them; round trips; idle PSS).
	Options
	// APIReady is the daemon of the api-ready measure: Exe, StateDir,
	// ServeArgs with a dataset, Instance of it and Creates rounds.
	APIReady APIOptions
	// Cache is the msb cache whose size the cache row reports ("": not
	// measured, and the row says so).
	Cache string
}

// GoalMeasures are the sandbox measures a goals run takes.
var GoalMeasures = []string{MeasureReady, MeasureProcess, MeasureThroughput, MeasureRoundTrip, MeasurePSS}

// Goals measures every row of issue 32's table in one run: Run's
// comparisons on the bare workload (msb-api in the throughput slices),
// then task ready through the API without and with a spare (interleaved
// round by round), then the cache's size; the load is sampled throughout.
// The report's Goals hold the table: each measure, its goal and whether it
// is met.
func Goals(ctx context.Context, rt *sandbox.Runtime, o GoalsOptions) (*Report, error) {
	o.Workloads = []string{WorkloadBare}
	if len(o.Measures) == 0 {
		o.Measures = GoalMeasures
	}
	o.API = true
	rep, err := Run(ctx, rt, o.Options)
	if err != nil {
		return rep, err
	}
	b := &bencher{o: o.Options, rt: rt, report: rep}
	if o.APIReady.Instance != "" {
		b.logf("%s: %s", MeasureAPIReady, o.APIReady.Instance)
		stop := b.sampleLoad(MeasureAPIReady, WorkloadBare)
		b.apiReady(ctx, o.APIReady)
		stop()
	} else {
		b.note(noteSkipped, "%s: no instance for the daemon", MeasureAPIReady)
	}
	if o.Cache != "" {
		b.cacheSize(o.Cache)
	}
	rep.Goals = goalRows(newView(rep.Samples), rep, o.Cache)
	return b.finish(), ctx.Err()
}

// apiReady runs createTimes against a daemon of o and records its rounds.
func (b *bencher) apiReady(ctx context.Context, o APIOptions) {
	d, err := startServe(ctx, o)
	if err != nil {
		b.note(noteFailed, "%s: %v", MeasureAPIReady, err)
		return
	}
	defer func() {
		if err := d.stop(); err != nil {
			b.note(noteFailed, "%s: msb serve: %v: %s", MeasureAPIReady, err, firstLines(d.log.String()))
		}
	}()
	c, err := client.New("unix://"+d.sock, "")
	if err != nil {
		b.note(noteFailed, "%s: %v", MeasureAPIReady, err)
		return
	}
	defer c.Close()
	took, errs, err := createTimes(ctx, o, c)
	if err != nil {
		b.note(noteFailed, "%s: %v", MeasureAPIReady, err)
		return
	}
	for way, phase := range []string{PhaseExec, PhaseSession} {
		for spare, method := range []string{MethodMSBAPI, MethodMSBAPISpare} {
			if errs[way][spare] != nil {
				b.note(noteFailed, "%s %s %s: %v", MeasureAPIReady, phase, method, errs[way][spare])
			}
			for i, d := range took[way][spare] {
				b.add(Sample{Key: Key{Measure: MeasureAPIReady, Workload: WorkloadBare, Method: method, Phase: phase, Cache: Warm},
					Round: i, Slot: spare, Value: d.Seconds(), Unit: UnitSeconds})
			}
		}
	}
}

// cacheSize records the bytes on disk of the cache dir.
func (b *bencher) cacheSize(dir string) {
	n, err := diskBytes(dir)
	if err != nil {
		b.note(noteFailed, "%s: %v", MeasureCache, err)
		return
	}
	b.add(Sample{Key: Key{Measure: MeasureCache, Workload: fsType(dir), Method: MethodMSB, Phase: PhaseTotal}, Round: -1, Value: float64(n), Unit: UnitBytes})
}

// fsType names the filesystem dir is on (the cache's size depends on it:
// btrfs compresses).
func fsType(dir string) string {
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) != nil {
		return "unknown"
	}
	switch st.Type {
	case unix.BTRFS_SUPER_MAGIC:
		return "btrfs"
	case unix.EXT4_SUPER_MAGIC:
		return "ext4"
	case unix.XFS_SUPER_MAGIC:
		return "xfs"
	case unix.TMPFS_MAGIC:
		return "tmpfs"
	case unix.OVERLAYFS_SUPER_MAGIC:
		return "overlay"
	}
	return fmt.Sprintf("0x%x", st.Type)
}

// GoalRow is one row of issue 32's table.
type GoalRow struct {
	Measure  string `json:"measure"`
	Measured string `json:"measured"`
	Goal     string `json:"goal"`
	// Met is yes, no, or "-" where the run did not measure it.
	Met string `json:"met"`
}

// goalRows are issue 32's rows from a run's summaries.
func goalRows(v *view, rep *Report, cache string) []GoalRow {
	p50 := func(k Key) (float64, bool) {
		s, ok := v.get(k)
		return s.P50, ok
	}
	ms := func(x float64) string { return fmtDuration(time.Duration(x * float64(time.Second))) }
	met := func(ok bool) string {
		if ok {
			return "yes"
		}
		return "no"
	}
	var rows []GoalRow
	add := func(measure, goal string, f func() (string, string)) {
		measured, m := f()
		if measured == "" {
			measured, m = "not measured", "-"
		}
		rows = append(rows, GoalRow{Measure: measure, Measured: measured, Goal: goal, Met: m})
	}
	bare := func(measure, method, phase, cache, param string) Key {
		return Key{Measure: measure, Workload: WorkloadBare, Method: method, Phase: phase, Cache: cache, Param: param}
	}

	add("`msb run -- true`, whole process, warm", "≤ the paper's bare pipeline (ratio ≤ 1.0)", func() (string, string) {
		m, ok := p50(bare(MeasureProcess, MethodMSB, PhaseRun, Warm, ""))
		p, okp := p50(bare(MeasureProcess, MethodPaper, PhaseRun, Warm, ""))
		if !ok || !okp {
			return "", ""
		}
		s := fmt.Sprintf("%s vs %s for the paper's pipeline (%.2f×)", ms(m), ms(p), m/p)
		if pm, ok := p50(bare(MeasureProcess, MethodPodman, PhaseRun, Warm, "")); ok {
			s += fmt.Sprintf("; `podman run --rm` %s (msb %s)", ms(pm), fmtRatio(m/pm))
		}
		return s, met(m <= p)
	})
	add("task ready, no spare (library: create with its session + first answer, warm)", "≤ 5 ms and ≤ 3% of podman", func() (string, string) {
		m, ok := p50(bare(MeasureReady, MethodMSB, "ready", Warm, ""))
		if !ok {
			return "", ""
		}
		s, good := ms(m), m <= 0.005
		if pm, ok := p50(bare(MeasureReady, MethodPodman, "ready", Warm, "")); ok {
			s += fmt.Sprintf(" (%s of podman's %s)", fmtRatio(m/pm), ms(pm))
			good = good && m/pm <= 0.03
		} else {
			s += " (podman not measured)"
		}
		if c, ok := p50(bare(MeasureReady, MethodMSB, "ready", Cold, "")); ok {
			s += fmt.Sprintf("; cold %s", ms(c))
		}
		return s, met(good)
	})
	apiReady := func(method string, limit float64) func() (string, string) {
		return func() (string, string) {
			e, oke := p50(bare(MeasureAPIReady, method, PhaseExec, Warm, ""))
			s, oks := p50(bare(MeasureAPIReady, method, PhaseSession, Warm, ""))
			if !oke || !oks {
				return "", ""
			}
			return fmt.Sprintf("%s in the create's session, %s in a fresh bash", ms(s), ms(e)), met(s <= limit)
		}
	}
	add("task ready, no spare, through the API (create from a cached instance → first command answered)", "≤ 5 ms", apiReady(MethodMSBAPI, 0.005))
	add("task ready from a spare (library)", "≤ 2 ms", func() (string, string) {
		m, ok := p50(bare(MeasureReady, MethodMSBSpare, "ready", Warm, ""))
		if !ok {
			return "", ""
		}
		return ms(m), met(m <= 0.002)
	})
	add("task ready from a spare, through the API (--spares 1)", "≤ 2 ms", apiReady(MethodMSBAPISpare, 0.002))
	add("created + first command + closed per second, 2 workers, through the API", "≥ 200/s", func() (string, string) {
		param := "workers=2"
		a, ok := p50(bare(MeasureThroughput, MethodMSBAPI, "cycle", Warm, param))
		if !ok {
			return "", ""
		}
		s := fmt.Sprintf("%.0f/s", a)
		for _, m := range []string{MethodMSB, MethodPaper, MethodPodman} {
			if x, ok := p50(bare(MeasureThroughput, m, "cycle", Warm, param)); ok {
				name := map[string]string{MethodMSB: "library", MethodPaper: "paper", MethodPodman: "podman"}[m]
				s += fmt.Sprintf("; %s %.0f/s", name, x)
			}
		}
		return s, met(a >= 200)
	})
	add("session round trip (`true` in the kept shell)", "≤ 0.1 ms", func() (string, string) {
		m, ok := p50(bare(MeasureRoundTrip, MethodMSB, PhaseSession, Warm, ""))
		if !ok {
			return "", ""
		}
		s := ms(m)
		for _, b := range []string{MethodMSBHost, MethodPodman, MethodRaw} {
			if x, ok := p50(bare(MeasureRoundTrip, b, PhaseSession, Warm, "")); ok {
				s += fmt.Sprintf("; %s %s", b, ms(x))
			}
		}
		return s, met(m <= 0.0001)
	})
	add("idle sandbox + shell, PSS of its processes", "≤ podman's", func() (string, string) {
		param := pssParam(rep.Options)
		m, ok := p50(bare(MeasurePSS, MethodMSB, PhasePSS, "", param))
		if !ok {
			return "", ""
		}
		mib := func(x float64) string { return fmt.Sprintf("%.2f MiB", x/(1<<20)) }
		s := mib(m)
		if h, ok := p50(bare(MeasurePSS, MethodMSB, PhaseHost, "", param)); ok {
			s += fmt.Sprintf(" + %.0f KiB host side", h/1024)
		}
		pm, ok := p50(bare(MeasurePSS, MethodPodman, PhasePSS, "", param))
		if !ok {
			return s + " (podman not measured)", "-"
		}
		return s + fmt.Sprintf(" vs podman %s (%.2f×)", mib(pm), m/pm), met(m <= pm)
	})
	add("the msb cache's size on disk", "≤ 2 GiB on any filesystem (SWE-bench Verified, the 9 repositories built)", func() (string, string) {
		for _, s := range Summaries(rep.Samples) {
			if s.Measure == MeasureCache {
				size := fmt.Sprintf("%.2f GiB", s.P50/(1<<30))
				if s.P50 < 1<<30 {
					size = fmt.Sprintf("%.1f MiB", s.P50/(1<<20))
				}
				return fmt.Sprintf("%s on %s (%s)", size, s.Workload, cache), met(s.P50 <= 2<<30)
			}
		}
		return "", ""
	})
	return rows
}

// goalsTable renders the goals.
func goalsTable(rows []GoalRow) []table {
	t := table{title: "Issue 32's goals (p50; each from this run)", header: []string{"measure", "measured", "goal", "met"}}
	for _, r := range rows {
		t.rows = append(t.rows, []string{r.Measure, r.Measured, r.Goal, r.Met})
	}
	return nonEmpty(t)
}
