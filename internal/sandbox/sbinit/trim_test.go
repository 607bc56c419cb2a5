package sbinit

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

func TestParseStatmAnon(t *testing.T) {
	cases := []struct {
		statm string
		want  uint64
		ok    bool
	}{
		{"1187 372 265 290 0 96 0\n", (372 - 265) * 4096, true},
		{"1187 0 0 0 0 0 0", 0, true},
		{"1187 372", 0, false},
		{"", 0, false},
		{"1187 x 265", 0, false},
		{"1187 372 y", 0, false},
		{"1187 265 372 0 0 0 0", 0, false},
	}
	for _, c := range cases {
		got, err := parseStatmAnon([]byte(c.statm), 4096)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("parseStatmAnon(%q) = %d, %v; want %d, ok %v", c.statm, got, err, c.want, c.ok)
		}
	}
}

// TestAnonBytes compares anonBytes with the kernel's RssAnon of the same
// process: statm's resident less shared is RssAnon.
func TestAnonBytes(t *testing.T) {
	got, err := anonBytes()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	var want uint64
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "RssAnon:" {
			kb, err := strconv.ParseUint(f[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			want = kb << 10
		}
	}
	if want == 0 {
		t.Fatalf("no RssAnon in /proc/self/status:\n%s", b)
	}
	// The two reads are a moment apart in a running Go program.
	if diff := int64(got) - int64(want); diff < -1<<20 || diff > 1<<20 {
		t.Fatalf("anonBytes %d, RssAnon %d bytes: more than 1 MiB apart", got, want)
	}
}
