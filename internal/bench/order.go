package bench

import (
	"context"
	"fmt"
)

// Order is the order in which n methods run in round r: the identity
// rotated left by r, so over n rounds every method runs once in every
// position: first (on whatever the previous round left behind) as often as
// last.
func Order(round, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = (i + round) % n
	}
	return out
}

// interleave runs rounds rounds of trial over the methods, in the order of
// Order, after warmup rounds whose results trial is to discard (it gets
// round < 0). A method whose trial fails is left out of the later rounds;
// failed maps it to its error. It stops early when ctx ends (and what ctx's
// end made fail is no failure).
func interleave(ctx context.Context, rounds, warmup int, methods []string, trial func(ctx context.Context, round, slot int, method string) error) (failed map[string]error) {
	failed = map[string]error{}
	for r := -warmup; r < rounds && ctx.Err() == nil; r++ {
		slot := 0
		for _, i := range Order(r+warmup, len(methods)) {
			m := methods[i]
			if failed[m] != nil || ctx.Err() != nil {
				continue
			}
			if err := trial(ctx, r, slot, m); err != nil && ctx.Err() == nil { // an interrupted run is not a failure
				failed[m] = fmt.Errorf("round %d: %w", r, err)
			}
			slot++
		}
	}
	return failed
}
