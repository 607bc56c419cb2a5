package bench

import (
	"sort"
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
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	var sum time.Duration
	for _, x := range d {
		sum += x
	}
	return Stats{N: len(d), P50: pct(d, 50), P95: pct(d, 95), Mean: sum / time.Duration(len(d))}
}

func pct(sorted []time.Duration, p int) time.Duration {
	i := (len(sorted)*p + 99) / 100
	if i > 0 {
		i--
	}
	return sorted[i]
}
