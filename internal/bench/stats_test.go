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
