package bench

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Plot writes PNG plots of samples into dir and returns their paths: the
// distribution of task-ready latency per method (one plot per workload and
// cache state) and of round trips, throughput per method and worker count,
// disk against N, and idle PSS per method.
func Plot(samples []Sample, dir string) ([]string, error) {
	series := map[Key][]float64{}
	var keys []Key
	for _, s := range samples {
		if _, ok := series[s.Key]; !ok {
			keys = append(keys, s.Key)
		}
		series[s.Key] = append(series[s.Key], s.Value)
	}
	var files []string
	save := func(p *plot.Plot, name string) error {
		f := filepath.Join(dir, name+".png")
		if err := p.Save(8*vg.Inch, 5*vg.Inch, f); err != nil {
			return fmt.Errorf("saving plot %s: %w", f, err)
		}
		files = append(files, f)
		return nil
	}
	for _, g := range groups(keys, func(k Key) bool { return k.Measure == MeasureReady && k.Phase == "ready" }) {
		p := ecdf(series, g, "task ready (create + first answer), "+g[0].Workload+", "+g[0].Cache, "ms", 1e3)
		if err := save(p, "ready-"+g[0].Workload+"-"+g[0].Cache); err != nil {
			return files, err
		}
	}
	for _, g := range groups(keys, func(k Key) bool { return k.Measure == MeasureRoundTrip }) {
		p := ecdf(series, g, "round trip of `true`, "+g[0].Phase, "µs", 1e6)
		if err := save(p, "roundtrip-"+g[0].Phase); err != nil {
			return files, err
		}
	}
	byWorkload := func(measure, phase string) [][]Key {
		var out [][]Key
		for _, g := range groups(keys, func(k Key) bool { return k.Measure == measure && k.Phase == phase }) {
			// groups split by param; merge them per workload
			if n := len(out); n > 0 && out[n-1][0].Workload == g[0].Workload {
				out[n-1] = append(out[n-1], g...)
				continue
			}
			out = append(out, g)
		}
		return out
	}
	for _, g := range byWorkload(MeasureThroughput, "cycle") {
		if err := save(pointsByMethod(series, g, "throughput, "+g[0].Workload, "tasks/s (log)", 1), "throughput-"+g[0].Workload); err != nil {
			return files, err
		}
	}
	for _, g := range byWorkload(MeasureDisk, PhaseTotal) {
		if err := save(diskVsN(series, g), "disk-"+g[0].Workload); err != nil {
			return files, err
		}
	}
	for _, g := range byWorkload(MeasurePSS, PhasePSS) {
		if err := save(pointsByMethod(series, g, "idle PSS per task with a shell, "+g[0].Workload, "MiB (log)", 1.0/(1<<20)), "pss-"+g[0].Workload); err != nil {
			return files, err
		}
	}
	return files, nil
}

// groups splits the keys that match into groups that differ only by
// method, in order of appearance.
func groups(keys []Key, match func(Key) bool) [][]Key {
	var order []Key
	by := map[Key][]Key{}
	for _, k := range keys {
		if !match(k) {
			continue
		}
		g := k.group()
		if _, ok := by[g]; !ok {
			order = append(order, g)
		}
		by[g] = append(by[g], k)
	}
	out := make([][]Key, 0, len(order))
	for _, g := range order {
		ks := by[g]
		slices.SortStableFunc(ks, func(a, b Key) int { return methodRank(a.Method) - methodRank(b.Method) })
		out = append(out, ks)
	}
	return out
}

func methodRank(m string) int {
	if i := slices.Index(methodOrder, m); i >= 0 {
		return i
	}
	return len(methodOrder)
}

// style gives each method the same color and glyph in every plot.
func style(method string) (int, draw.GlyphStyle) {
	i := methodRank(method)
	return i, draw.GlyphStyle{Color: plotutil.Color(i), Radius: vg.Points(3), Shape: plotutil.Shape(i)}
}

func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = x
	p.Y.Label.Text = y
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	return p
}

// ecdf plots the empirical distribution of each key's values (times
// scale) on a log x axis.
func ecdf(series map[Key][]float64, ks []Key, title, unit string, scale float64) *plot.Plot {
	p := newPlot(title, unit+" (log)", "fraction of samples at or below")
	p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	p.Y.Min, p.Y.Max = 0, 1
	p.Legend.Top, p.Legend.Left = false, false // in the room made on the right
	hi := 0.0
	for _, k := range ks {
		v := positive(series[k], scale)
		if len(v) == 0 {
			continue
		}
		slices.Sort(v)
		hi = max(hi, v[len(v)-1])
		xys := make(plotter.XYs, len(v))
		for i, x := range v {
			xys[i] = plotter.XY{X: x, Y: float64(i+1) / float64(len(v))}
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			continue
		}
		i, _ := style(k.Method)
		l.Color, l.Width = plotutil.Color(i), vg.Points(1.5)
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("%s (n=%d)", k.Method, len(v)), l)
	}
	p.X.Max = max(p.X.Max, hi*4)
	return p
}

// pointsByMethod plots every sample of each key as a point over its
// method's name (log y), one glyph per param (e.g. worker count).
func pointsByMethod(series map[Key][]float64, ks []Key, title, y string, scale float64) *plot.Plot {
	p := newPlot(title, "", y)
	p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	var methods, params []string
	for _, k := range ks {
		if !slices.Contains(methods, k.Method) {
			methods = append(methods, k.Method)
		}
		if !slices.Contains(params, k.Param) {
			params = append(params, k.Param)
		}
	}
	for _, k := range ks {
		v := positive(series[k], scale)
		if len(v) == 0 {
			continue
		}
		pi := slices.Index(params, k.Param)
		x := float64(slices.Index(methods, k.Method)) + 0.15*float64(pi) - 0.075*float64(len(params)-1)
		xys := make(plotter.XYs, len(v))
		for i, y := range v {
			xys[i] = plotter.XY{X: x, Y: y}
		}
		sc, err := plotter.NewScatter(xys)
		if err != nil {
			continue
		}
		_, gs := style(k.Method)
		gs.Shape = plotutil.Shape(pi)
		sc.GlyphStyle = gs
		p.Add(sc)
		if k.Param != "" {
			p.Legend.Add(k.Method+" "+k.Param, sc)
		}
	}
	p.NominalX(methods...)
	p.X.Min, p.X.Max = -0.5, float64(len(methods))-0.5
	p.Y.Max *= 6 // room for the legend above the points
	return p
}

// diskVsN plots total bytes against N per method, on log axes.
func diskVsN(series map[Key][]float64, ks []Key) *plot.Plot {
	p := newPlot("disk while N tasks exist, "+ks[0].Workload, "N (instances, log)", "MiB (log)")
	p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	by := map[string]plotter.XYs{}
	var methods []string
	for _, k := range ks {
		n, err := strconv.Atoi(strings.TrimPrefix(k.Param, "n="))
		v := positive(series[k], 1.0/(1<<20))
		if err != nil || n <= 0 || len(v) == 0 {
			continue
		}
		if _, ok := by[k.Method]; !ok {
			methods = append(methods, k.Method)
		}
		by[k.Method] = append(by[k.Method], plotter.XY{X: float64(n), Y: v[0]})
	}
	for _, m := range methods {
		xys := by[m]
		slices.SortFunc(xys, func(a, b plotter.XY) int { return int(a.X - b.X) })
		l, sc, err := plotter.NewLinePoints(xys)
		if err != nil {
			continue
		}
		i, gs := style(m)
		l.Color, sc.GlyphStyle = plotutil.Color(i), gs
		p.Add(l, sc)
		p.Legend.Add(m, l, sc)
	}
	return p
}

// positive scales v and keeps what a log axis can show.
func positive(v []float64, scale float64) []float64 {
	var out []float64
	for _, x := range v {
		if x*scale > 0 {
			out = append(out, x*scale)
		}
	}
	return out
}
