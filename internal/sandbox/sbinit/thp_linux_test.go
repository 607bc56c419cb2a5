package sbinit

import "testing"

// TestPrivateAnon: the mappings noHugePages advises are the private,
// writable ones of no file and no kernel name.
func TestPrivateAnon(t *testing.T) {
	cases := []struct {
		line       string
		start, end uintptr
		ok         bool
	}{
		{"009da000-02a13000 rw-p 00000000 00:00 0 ", 0x9da000, 0x2a13000, true},
		{"c000000000-c000400000 rw-p 00000000 00:00 0", 0xc000000000, 0xc000400000, true},
		{"7ffd1000-7ffd2000 rw-p 00000000 00:00 0                          [stack]", 0, 0, false},
		{"00400000-00900000 r-xp 00000000 08:01 1234                       /usr/bin/msb", 0, 0, false},
		{"00900000-009da000 rw-p 00500000 08:01 1234                       /usr/bin/msb", 0, 0, false},
		{"7f000000-7f001000 rw-s 00000000 00:01 99                         /dev/zero", 0, 0, false},
		{"", 0, 0, false},
	}
	for _, c := range cases {
		start, end, ok := privateAnon([]byte(c.line))
		if start != c.start || end != c.end || ok != c.ok {
			t.Errorf("privateAnon(%q) = %#x, %#x, %v; want %#x, %#x, %v", c.line, start, end, ok, c.start, c.end, c.ok)
		}
	}
}
