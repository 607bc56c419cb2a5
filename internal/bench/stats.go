package bench

import (
	"slices"
	"time"
)

// Stats summarizes a sample of durations.
type Stats struct {
	N    int           `json:"n"`
	P50  time.Duration `json:"p50_ns"`
	P95  time.Duration `json:"p95_ns"`
	Mean time.Duration `json:"mean_ns"`
}

// Summarize computes Stats of d (which it sorts).
func Summarize(d []time.Duration) Stats {
	if len(d) == 0 {
		return Stats{}
	}
	slices.Sort(d)
	var sum time.Duration
	for _, x := range d {
		sum += x
	}
	return Stats{N: len(d), P50: d[rank(len(d), 50)], P95: d[rank(len(d), 95)], Mean: sum / time.Duration(len(d))}
}

// rank is the index of the p-th percentile in a sorted sample of n values,
// by the nearest-rank method: the smallest value with at least p% of the
// sample at or below it.
func rank(n, p int) int {
	i := (n*p + 99) / 100
	if i > 0 {
		i--
	}
	return i
}

// quantiles returns the p50, p95, mean, min and max of v (which it sorts).
func quantiles(v []float64) (p50, p95, mean, lo, hi float64) {
	if len(v) == 0 {
		return 0, 0, 0, 0, 0
	}
	slices.Sort(v)
	var sum float64
	for _, x := range v {
		sum += x
	}
	return v[rank(len(v), 50)], v[rank(len(v), 95)], sum / float64(len(v)), v[0], v[len(v)-1]
}
