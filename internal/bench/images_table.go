package bench

import (
	"fmt"
	"slices"
	"strconv"
)

// imageRow is one line of the images table: what a method's samples of
// one image and phase give.
type imageRow struct {
	what, image, phase, method string
	unit                       string
	n                          int
	p50, p95                   float64
	vsPodman                   float64 // p50 over podman's p50 in the same image and phase; 0 without
}

// imageWhat says, in the table, what each image and phase measures.
var imageWhat = []struct{ image, phase, what string }{
	{"a", PhaseImageFiles, "A's regular files (base + its layers)"},
	{"b", PhaseImageFiles, "B's own layers' regular files"},
	{"b", PhaseUniqueFiles, "B's unique files (content in no layer of A, each once)"},
	{"a", PhaseImport, "import of A into an empty store"},
	{"a", PhaseStore, "the store after A, allocated"},
	{"a", PhaseStoreApp, "the store after A, apparent"},
	{"b", PhaseImport, "import of B into the store holding A"},
	{"b", PhaseAdded, "disk B added, allocated"},
	{"b", PhaseAddedApp, "disk B added, apparent"},
	{"a", "create", "task on A: created, shell started"},
	{"a", "answer", "task on A: first command answered"},
	{"a", "ready", "task on A: ready (create + answer)"},
}

// imagesMethods is the order of the methods in the images table.
var imagesMethods = []string{MethodLayers, MethodMSB, MethodMSBHostBase, MethodPodman}

// imageRows summarizes the images measure: p50 and p95 by nearest rank,
// in imageWhat's order, methods in imagesMethods' order.
func imageRows(samples []Sample) []imageRow {
	vals := map[Key][]float64{}
	units := map[Key]string{}
	for _, s := range samples {
		if s.Measure == MeasureImages {
			vals[s.Key] = append(vals[s.Key], s.Value)
			units[s.Key] = s.Unit
		}
	}
	var out []imageRow
	for _, w := range imageWhat {
		start := len(out)
		for _, m := range imagesMethods {
			k := Key{Measure: MeasureImages, Workload: w.image, Method: m, Phase: w.phase}
			v := slices.Clone(vals[k])
			if len(v) == 0 {
				continue
			}
			p50, p95, _, _, _ := quantiles(v)
			out = append(out, imageRow{what: w.what, image: w.image, phase: w.phase, method: m, unit: units[k], n: len(v), p50: p50, p95: p95})
		}
		rows := out[start:]
		i := slices.IndexFunc(rows, func(r imageRow) bool { return r.method == MethodPodman })
		if i < 0 || rows[i].p50 == 0 {
			continue
		}
		for j := range rows {
			if j != i {
				rows[j].vsPodman = rows[j].p50 / rows[i].p50
			}
		}
	}
	return out
}

// imageTarget is one of issue 27's targets, checked on a run's p50s.
type imageTarget struct {
	what          string
	value, target float64
	met           bool
	hasTarget     bool
}

// imageTargets are the ratios issue 27 sets targets for, from rows:
// B's added disk over its unique files (msb ≤ 1.1, podman given for
// comparison), task ready on A over task ready on the host base (≤ 1.1)
// and over podman's (≤ 5%); and, without a target, import time and disk
// of A over podman's.
func imageTargets(rows []imageRow) []imageTarget {
	p50 := func(image, phase, method string) (float64, bool) {
		i := slices.IndexFunc(rows, func(r imageRow) bool { return r.image == image && r.phase == phase && r.method == method })
		if i < 0 {
			return 0, false
		}
		return rows[i].p50, true
	}
	var out []imageTarget
	ratio := func(what string, target float64, a, b float64, okA, okB bool) {
		if !okA || !okB || b == 0 {
			return
		}
		r := a / b
		out = append(out, imageTarget{what: what, value: r, target: target, hasTarget: target > 0, met: target > 0 && r <= target})
	}
	unique, okU := p50("b", PhaseUniqueFiles, MethodLayers)
	for _, m := range []string{MethodMSB, MethodPodman} {
		target := 1.1
		if m == MethodPodman {
			target = 0 // the target is msb's
		}
		for _, ph := range []string{PhaseAdded, PhaseAddedApp} {
			v, ok := p50("b", ph, m)
			ratio(fmt.Sprintf("%s: %s / B's unique files", m, whatOf("b", ph)), target, v, unique, ok, okU)
		}
	}
	img, okI := p50("a", "ready", MethodMSB)
	host, okH := p50("a", "ready", MethodMSBHostBase)
	pod, okP := p50("a", "ready", MethodPodman)
	ratio("msb: task ready on A / on the host base", 1.1, img, host, okI, okH)
	ratio("task ready: msb on A / podman run of A", 0.05, img, pod, okI, okP)
	for _, ph := range []string{PhaseImport, PhaseStore, PhaseStoreApp} {
		a, okA := p50("a", ph, MethodMSB)
		b, okB := p50("a", ph, MethodPodman)
		ratio(whatOf("a", ph)+": msb / podman", 0, a, b, okA, okB)
	}
	return out
}

func whatOf(image, phase string) string {
	for _, w := range imageWhat {
		if w.image == image && w.phase == phase {
			return w.what
		}
	}
	return phase
}

// imagesTables renders the images measure.
func imagesTables(samples []Sample) []table {
	rows := imageRows(samples)
	t := table{title: "Images: msb cache import-image vs podman pull from the same registry on loopback, each into a new store; task ready on the image (p50 and p95 by nearest rank; a ratio is the row's p50 over podman's)",
		header: []string{"what", "method", "n", "p50", "p95", "vs podman"}}
	for _, r := range rows {
		ratio := "-"
		if r.vsPodman > 0 {
			ratio = fmtRatio(r.vsPodman)
		}
		t.rows = append(t.rows, []string{r.what, r.method, strconv.Itoa(r.n), fmtValue(r.p50, r.unit), fmtValue(r.p95, r.unit), ratio})
	}
	g := table{title: "Images: issue 27's targets (ratios of p50s)", header: []string{"ratio", "value", "target", "met"}}
	for _, x := range imageTargets(rows) {
		target, met := "-", "-"
		if x.hasTarget {
			target, met = "≤ "+fmtRatioPlain(x.target), strconv.FormatBool(x.met)
		}
		g.rows = append(g.rows, []string{x.what, fmtRatioPlain(x.value), target, met})
	}
	return nonEmpty(t, g)
}

// fmtRatioPlain writes a ratio as a number with three decimals.
func fmtRatioPlain(r float64) string { return strconv.FormatFloat(r, 'f', 3, 64) }
