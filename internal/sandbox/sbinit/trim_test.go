package sbinit

import "testing"

func TestParseStatmResident(t *testing.T) {
	cases := []struct {
		statm string
		want  uint64
		ok    bool
	}{
		{"1187 372 265 290 0 96 0\n", 372 * 4096, true},
		{"1187 0 0 0 0 0 0", 0, true},
		{"1187", 0, false},
		{"", 0, false},
		{"1187 x 265", 0, false},
	}
	for _, c := range cases {
		got, err := parseStatmResident([]byte(c.statm), 4096)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("parseStatmResident(%q) = %d, %v; want %d, ok %v", c.statm, got, err, c.want, c.ok)
		}
	}
}

// TestResidentBytes reads this process's own statm: a running Go test
// has megabytes resident.
func TestResidentBytes(t *testing.T) {
	n, err := residentBytes()
	if err != nil {
		t.Fatal(err)
	}
	if n < 1<<20 {
		t.Fatalf("resident %d bytes: below 1 MiB, not a running Go test", n)
	}
}
