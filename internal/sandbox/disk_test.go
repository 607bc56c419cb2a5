package sandbox

import "testing"

func TestScratchSizes(t *testing.T) {
	const mi = 1 << 20
	for _, tc := range []struct {
		name              string
		l                 Limits
		memoryHoldsFiles  bool
		wantTmp, wantRest int64
	}{
		{"defaults with a cgroup", DefaultLimits, false, 1 << 30, 10 << 30},
		{"tmp capped by disk", Limits{MemoryBytes: 4 << 30, TmpBytes: 1 << 30, DiskBytes: 64 * mi}, false, 64 * mi, 64 * mi},
		{"defaults without a cgroup", DefaultLimits, true, 1 << 30, 3 << 30},
		{"small memory without a cgroup", Limits{MemoryBytes: 256 * mi, TmpBytes: 1 << 30, DiskBytes: 10 << 30}, true, 128 * mi, 128 * mi},
		{"small tmp without a cgroup", Limits{MemoryBytes: 256 * mi, TmpBytes: 8 * mi, DiskBytes: 10 << 30}, true, 8 * mi, 248 * mi},
		{"small disk without a cgroup", Limits{MemoryBytes: 4 << 30, TmpBytes: 1 << 30, DiskBytes: 64 * mi}, true, 64 * mi, 64 * mi},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmp, rest := scratchSizes(tc.l, tc.memoryHoldsFiles)
			if tmp != tc.wantTmp || rest != tc.wantRest {
				t.Fatalf("scratchSizes = %d MiB, %d MiB; want %d MiB, %d MiB", tmp/mi, rest/mi, tc.wantTmp/mi, tc.wantRest/mi)
			}
			if tc.memoryHoldsFiles && tmp+rest > tc.l.MemoryBytes {
				t.Fatalf("the tmpfs hold %d bytes together, over the memory limit %d", tmp+rest, tc.l.MemoryBytes)
			}
		})
	}
}
