package checkpoint

import "testing"

func TestUnder(t *testing.T) {
	for _, c := range []struct {
		p, dir, rel string
		ok          bool
	}{
		{"/usr", "/", "usr", true},
		{"/msb/abc", "/msb/abc", "", true},
		{"/msb/abc/shm", "/msb/abc", "shm", true},
		{"/msb/abcd", "/msb/abc", "", false}, // a sibling with the same prefix
		{"/etc", "/usr", "", false},
	} {
		rel, ok := under(c.p, c.dir)
		if rel != c.rel || ok != c.ok {
			t.Errorf("under(%q, %q) = %q, %v; want %q, %v", c.p, c.dir, rel, ok, c.rel, c.ok)
		}
	}
}

func TestHierarchyOf(t *testing.T) {
	hs := []string{"name=systemd", "pids", "cpu,cpuacct", "memory"}
	for _, c := range []struct {
		super []string
		want  string
	}{
		{[]string{"rw", "memory"}, "memory"},
		{[]string{"rw", "cpu", "cpuacct"}, "cpu,cpuacct"},
		{[]string{"rw", "xattr", "name=systemd"}, "name=systemd"},
		{[]string{"rw", "cpu"}, ""}, // not all of cpu,cpuacct
		{[]string{"rw", "freezer"}, ""},
	} {
		if got := hierarchyOf(c.super, hs); got != c.want {
			t.Errorf("hierarchyOf(%q) = %q, want %q", c.super, got, c.want)
		}
	}
}
