package bench

import (
	"encoding/csv"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// Measures.
const (
	MeasureReady      = "ready"      // phases create, answer, ready (= create+answer), close, cycle (= all three); msb's own too (sandbox.Phase names)
	MeasureProcess    = "process"    // a whole process that makes a task, runs true in it and removes it; phase run
	MeasureThroughput = "throughput" // tasks created, answered and closed per second; Param workers=N
	MeasureRoundTrip  = "roundtrip"  // one command's round trip; phase session or exec
	MeasurePSS        = "pss"        // idle memory per task; phase pss (whole tree), top (root process), memavail
	MeasureDisk       = "disk"       // bytes on disk while N tasks exist; Param n=N; phase total or a component
	MeasurePrep       = "prep"       // first-time preparation; phase env (the shared environment) or instance
)

// Methods every comparison knows by name.
const (
	MethodMSB     = "msb"
	MethodPaper   = "paper"
	MethodPodman  = "podman"
	MethodRaw     = "raw"      // a shell on a pipe (or bash -c) on the host: no isolation
	MethodMSBHost = "msb-host" // msb's session protocol on the host, no sandbox
	// MethodMSBSpare is msb where the task was made ahead (msb serve
	// --spares), untimed: the ready measure only.
	MethodMSBSpare = "msb-spare"
)

// Baselines are the methods ratios are taken against, most telling first.
var Baselines = []string{MethodPodman, MethodPaper, MethodRaw}

// Units.
const (
	UnitSeconds = "s"
	UnitPerSec  = "1/s"
	UnitBytes   = "bytes"
	UnitTasks   = "tasks" // a count of runnable tasks (load)
)

// Sample is one measured value.
type Sample struct {
	Key
	Round int // the round it was taken in (-1: not interleaved)
	Slot  int // the method's position within its round
	Value float64
	Unit  string
}

// Key says what a sample measures; samples of one Key form a distribution.
type Key struct {
	Measure  string
	Workload string
	Method   string
	Phase    string
	Cache    string // warm, cold, or "" where the page cache does not matter
	Param    string // e.g. workers=2, n=10
}

// group is a Key without its method: the samples methods are compared on.
func (k Key) group() Key { k.Method = ""; return k }

var csvHeader = []string{"measure", "workload", "method", "phase", "cache", "param", "round", "slot", "value", "unit"}

// WriteCSV writes samples with a header row.
func WriteCSV(w io.Writer, samples []Sample) error {
	cw := csv.NewWriter(w)
	cw.Write(csvHeader)
	for _, s := range samples {
		cw.Write([]string{s.Measure, s.Workload, s.Method, s.Phase, s.Cache, s.Param,
			strconv.Itoa(s.Round), strconv.Itoa(s.Slot), strconv.FormatFloat(s.Value, 'g', -1, 64), s.Unit})
	}
	cw.Flush()
	return cw.Error()
}

// ReadCSV reads what WriteCSV wrote.
func ReadCSV(r io.Reader) ([]Sample, error) {
	rows, err := csv.NewReader(r).ReadAll()
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 || !slices.Equal(rows[0], csvHeader) {
		return nil, fmt.Errorf("samples CSV: header is not %s", strings.Join(csvHeader, ","))
	}
	var out []Sample
	for i, r := range rows[1:] {
		round, err1 := strconv.Atoi(r[6])
		slot, err2 := strconv.Atoi(r[7])
		v, err3 := strconv.ParseFloat(r[8], 64)
		if err1 != nil || err2 != nil || err3 != nil {
			return nil, fmt.Errorf("samples CSV line %d: bad number in %q", i+2, strings.Join(r, ","))
		}
		out = append(out, Sample{Key: Key{r[0], r[1], r[2], r[3], r[4], r[5]}, Round: round, Slot: slot, Value: v, Unit: r[9]})
	}
	return out, nil
}

// Summary is the distribution of one Key's samples.
type Summary struct {
	Key
	Unit                     string
	N                        int
	P50, P95, Mean, Min, Max float64
	// Ratio is this method's p50 over each baseline's p50 in the same
	// group (same measure, workload, phase, cache and param).
	Ratio map[string]float64
}

// Summarize groups samples by Key, in the order keys first appear, and
// computes each group's ratios to the baselines present in it.
func Summaries(samples []Sample) []Summary {
	var order []Key
	vals := map[Key][]float64{}
	units := map[Key]string{}
	for _, s := range samples {
		if _, ok := vals[s.Key]; !ok {
			order = append(order, s.Key)
		}
		vals[s.Key] = append(vals[s.Key], s.Value)
		units[s.Key] = s.Unit
	}
	out := make([]Summary, 0, len(order))
	idx := map[Key]int{}
	for _, k := range order {
		v := slices.Clone(vals[k])
		sm := Summary{Key: k, Unit: units[k], N: len(v)}
		sm.P50, sm.P95, sm.Mean, sm.Min, sm.Max = quantiles(v)
		idx[k] = len(out)
		out = append(out, sm)
	}
	for i := range out {
		for _, b := range Baselines {
			bk := out[i].Key
			bk.Method = b
			j, ok := idx[bk]
			if !ok || bk == out[i].Key || out[j].P50 == 0 {
				continue
			}
			if out[i].Ratio == nil {
				out[i].Ratio = map[string]float64{}
			}
			out[i].Ratio[b] = out[i].P50 / out[j].P50
		}
	}
	return out
}
