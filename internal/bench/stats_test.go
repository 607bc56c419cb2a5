package bench

import (
	"testing"
	"time"
)

func TestSummarize(t *testing.T) {
	var d []time.Duration
	for i := 100; i >= 1; i-- {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	s := Summarize(d)
	if s.N != 100 || s.P50 != 50*time.Millisecond || s.P95 != 95*time.Millisecond || s.Mean != 50500*time.Microsecond {
		t.Fatalf("%+v", s)
	}
	if (Summarize(nil) != Stats{}) {
		t.Fatal("empty sample")
	}
}

func TestQuantiles(t *testing.T) {
	for _, tc := range []struct {
		name                     string
		v                        []float64
		p50, p95, mean, min, max float64
	}{
		{"one", []float64{7}, 7, 7, 7, 7, 7},
		{"two", []float64{4, 2}, 2, 4, 3, 2, 4},
		// nearest rank: p50 of 1..10 is the 5th value, p95 the 10th
		{"ten", []float64{10, 9, 8, 7, 6, 5, 4, 3, 2, 1}, 5, 10, 5.5, 1, 10},
		{"twenty", []float64{20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1}, 10, 19, 10.5, 1, 20},
		{"empty", nil, 0, 0, 0, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p50, p95, mean, lo, hi := quantiles(tc.v)
			if p50 != tc.p50 || p95 != tc.p95 || mean != tc.mean || lo != tc.min || hi != tc.max {
				t.Fatalf("quantiles(%v) = %v %v %v %v %v, want %v %v %v %v %v", tc.v, p50, p95, mean, lo, hi, tc.p50, tc.p95, tc.mean, tc.min, tc.max)
			}
		})
	}
}
