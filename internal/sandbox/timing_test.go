package sandbox

import (
	"reflect"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/sandbox/sbinit"
	"github.com/minisandbox/msb/internal/sandbox/wire"
)

// TestTimingsStamps: the stamps of init and the supervisor become the
// phases ending at each; a stamp before the one before it (which would be
// a clock the host does not share) or of an unknown step adds nothing.
func TestTimingsStamps(t *testing.T) {
	ms := func(n int64) int64 { return n * int64(time.Millisecond) }
	stamp := func(step string, at int64) wire.Stamp { return wire.Stamp{Step: step, Mono: ms(at)} }
	for _, tc := range []struct {
		name   string
		stamps []wire.Stamp
		ready  int64
		want   []Phase
	}{
		{"all", []wire.Stamp{stamp(sbinit.StepInitConfig, 12), stamp(sbinit.StepInitRoot, 15), stamp(sbinit.StepInitStart, 16),
			stamp(sbinit.StepInitCaps, 17), stamp(sbinit.StepSupMain, 20), stamp(sbinit.StepSupHarden, 21)}, ms(23),
			[]Phase{{PhaseInitRun, 2 * time.Millisecond}, {PhaseMounts, 3 * time.Millisecond}, {PhaseWaitStart, time.Millisecond},
				{PhaseInitCaps, time.Millisecond}, {PhaseSupRuntime, 3 * time.Millisecond}, {PhaseSupHarden, time.Millisecond},
				{PhaseSupReady, 2 * time.Millisecond}}},
		{"none", nil, ms(30), nil},
		{"backwards", []wire.Stamp{stamp(sbinit.StepInitConfig, 5), stamp(sbinit.StepInitRoot, 13)}, ms(14),
			[]Phase{{PhaseMounts, 8 * time.Millisecond}, {PhaseSupReady, time.Millisecond}}},
		{"unknown step", []wire.Stamp{stamp("later.step", 11), stamp(sbinit.StepInitRoot, 13)}, ms(14),
			[]Phase{{PhaseMounts, 2 * time.Millisecond}, {PhaseSupReady, time.Millisecond}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tm timings
			tm.stamps(ms(10), tc.stamps, tc.ready)
			if got := tm.list(); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("phases %v, want %v", got, tc.want)
			}
		})
	}
}
