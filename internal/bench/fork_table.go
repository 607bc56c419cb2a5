package bench

import (
	"slices"
	"strconv"
	"strings"
)

// forkRow is one line of the fork table: a method's distribution of one
// phase and param.
type forkRow struct {
	phase, param, method string
	unit                 string
	n                    int
	p50, p90             float64
	vsPodman             float64 // p50 over podman's p50; 0 without podman
}

// forkRows summarizes the fork measure's samples: p50 and p90 by nearest
// rank, in the order the phases and params first appear, methods in
// methodOrder.
func forkRows(samples []Sample) []forkRow {
	vals := map[Key][]float64{}
	units := map[Key]string{}
	var groups []Key
	for _, s := range samples {
		if s.Measure != MeasureFork {
			continue
		}
		if g := s.group(); !slices.Contains(groups, g) {
			groups = append(groups, g)
		}
		vals[s.Key] = append(vals[s.Key], s.Value)
		units[s.Key] = s.Unit
	}
	var out []forkRow
	for _, g := range groups {
		start := len(out)
		for _, m := range methodOrder {
			k := g
			k.Method = m
			v := slices.Clone(vals[k])
			if len(v) == 0 {
				continue
			}
			slices.Sort(v)
			out = append(out, forkRow{phase: k.Phase, param: k.Param, method: m, unit: units[k], n: len(v),
				p50: v[rank(len(v), 50)], p90: v[rank(len(v), 90)]})
		}
		rows := out[start:]
		i := slices.IndexFunc(rows, func(r forkRow) bool { return r.method == MethodPodman })
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

// forkTables renders the fork measure.
func forkTables(samples []Sample) []table {
	t := table{title: "Fork, snapshot and rollback (p50 and p90 by nearest rank; a ratio is the row's p50 over podman's: podman commit, podman commit + run)",
		header: []string{"what", "param", "method", "n", "p50", "p90", "vs podman"}}
	for _, r := range forkRows(samples) {
		ratio := "-"
		if r.vsPodman > 0 {
			ratio = fmtRatio(r.vsPodman)
		}
		t.rows = append(t.rows, []string{forkPhaseNames[r.phase], strings.TrimPrefix(r.param, "written="), r.method, strconv.Itoa(r.n),
			fmtValue(r.p50, r.unit), fmtValue(r.p90, r.unit), ratio})
	}
	return nonEmpty(t)
}

// forkPhaseNames say in the table what each phase measures.
var forkPhaseNames = map[string]string{
	PhaseSnapshot: "snapshot of a sandbox that wrote",
	PhaseFork:     "fork → the child's first command answered",
	PhaseForkAll:  "fork → every child's first command answered",
	PhaseRollback: "rollback of a sandbox that wrote",
	PhaseForkPSS:  "PSS of an idle child",
	PhaseForkDisk: "disk of an idle child (its files' bytes)",
}
