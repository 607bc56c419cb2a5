package cgroup

import "testing"

// TestAttachWait: expedited grace periods or favordynmods (v2 only) make
// a move fast; otherwise it waits.
func TestAttachWait(t *testing.T) {
	v2Favors := "cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid,nodev,noexec,relatime,nsdelegate,favordynmods 0 0\n"
	v2Plain := "cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid,nodev,noexec,relatime,nsdelegate 0 0\n"
	for _, tc := range []struct {
		name      string
		v         Version
		expedited string
		mounts    string
		waits     bool
	}{
		{"v1, not expedited", V1, "0\n", "cgroup /sys/fs/cgroup/memory cgroup rw,memory 0 0\n", true},
		{"v1, expedited", V1, "1\n", "", false},
		{"v2 with favordynmods", V2, "0\n", v2Favors, false},
		{"v2 without", V2, "0\n", v2Plain, true},
		{"favordynmods counts only for v2", V1, "0\n", v2Favors, true},
		{"no rcu_expedited file", V2, "", v2Plain, true},
		{"an option that only contains the word", V2, "0", "cgroup2 /x cgroup2 rw,nofavordynmods 0 0\n", true},
	} {
		if waits, why := attachWait(tc.v, tc.expedited, tc.mounts); waits != tc.waits || why == "" {
			t.Errorf("%s: waits %v (%q), want %v", tc.name, waits, why, tc.waits)
		}
	}
}
