package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
)

// Over n rounds every method runs once in every position, and every
// round runs each method exactly once.
func TestOrderRotates(t *testing.T) {
	for n := 1; n <= 5; n++ {
		seen := make([][]int, n) // seen[method][position]
		for i := range seen {
			seen[i] = make([]int, n)
		}
		for r := range n {
			o := Order(r, n)
			sorted := slices.Clone(o)
			slices.Sort(sorted)
			for i, m := range sorted {
				if m != i {
					t.Fatalf("n=%d round %d: %v is not a permutation", n, r, o)
				}
			}
			for pos, m := range o {
				seen[m][pos]++
			}
		}
		for m := range n {
			for pos := range n {
				if seen[m][pos] != 1 {
					t.Fatalf("n=%d: method %d ran %d times at position %d", n, m, seen[m][pos], pos)
				}
			}
		}
	}
}

func TestInterleave(t *testing.T) {
	var log []string
	failed := interleave(context.Background(), 3, 1, []string{"a", "b", "c"}, func(ctx context.Context, round, slot int, m string) error {
		log = append(log, fmt.Sprintf("%d:%d:%s", round, slot, m))
		if m == "b" && round == 1 {
			return errors.New("boom")
		}
		return nil
	})
	want := []string{
		"-1:0:a", "-1:1:b", "-1:2:c", // warm-up, rounds < 0
		"0:0:b", "0:1:c", "0:2:a",
		"1:0:c", "1:1:a", "1:2:b", // b fails here ...
		"2:0:a", "2:1:c", // ... and is left out after
	}
	if !slices.Equal(log, want) {
		t.Fatalf("trials ran\n%v\nwant\n%v", log, want)
	}
	if len(failed) != 1 || failed["b"] == nil || failed["b"].Error() != "round 1: boom" {
		t.Fatalf("failed = %v", failed)
	}
}

func TestInterleaveStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	interleave(ctx, 10, 0, []string{"a", "b"}, func(ctx context.Context, round, slot int, m string) error {
		n++
		if n == 3 {
			cancel()
		}
		return nil
	})
	if n != 3 {
		t.Fatalf("%d trials ran after the context ended at the 3rd", n)
	}
}

func TestOptionsCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Options)
		ok   bool
	}{
		{"defaults", func(o *Options) {}, true},
		{"no work dir", func(o *Options) { o.Work = "" }, false},
		{"unknown measure", func(o *Options) { o.Measures = []string{"ready", "speed"} }, false},
		{"unknown method", func(o *Options) { o.Methods = []string{"docker"} }, false},
		{"negative warmup", func(o *Options) { o.Warmup = -1 }, false},
		{"zero disk N", func(o *Options) { o.DiskNs = []int{0, 10} }, false},
		{"zero workers", func(o *Options) { o.Workers = []int{0} }, false},
		{"some methods", func(o *Options) { o.Methods = []string{MethodMSB, MethodRaw} }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := Options{Work: "/tmp/w"}
			o.Defaults()
			tc.edit(&o)
			err := o.check()
			if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrOptions)) {
				t.Fatalf("check() = %v, want ok=%v", err, tc.ok)
			}
		})
	}
}
