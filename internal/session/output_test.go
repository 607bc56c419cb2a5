package session

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestSanitize(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"empty", "", ""},
		{"ascii", "hello\n", "hello\n"},
		{"utf8", "héllo wörld ✓ 🙂", "héllo wörld ✓ 🙂"},
		{"invalid byte", "a\xffb", `a\xffb`},
		{"nul", "a\x00b", `a\x00b`},
		{"truncated rune", "ab\xe2\x9c", `ab\xe2\x9c`},
		{"surrogate", "\xed\xa0\x80", `\xed\xa0\x80`},
		{"control kept", "\x1b[31mred\x1b[0m\r\t", "\x1b[31mred\x1b[0m\r\t"},
		{"backslash kept", `C:\xff`, `C:\xff`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := sanitize([]byte(tt.in)); got != tt.want {
				t.Errorf("sanitize(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func FuzzSanitize(f *testing.F) {
	for _, s := range []string{"", "abc", "a\xffb\x00", "✓\xe2\x9c", "\xf0\x9f\x99"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got := sanitize(b)
		if !utf8.ValidString(got) {
			t.Fatalf("sanitize(%q) = %q: not valid UTF-8", b, got)
		}
		if strings.IndexByte(got, 0) >= 0 {
			t.Fatalf("sanitize(%q) = %q: holds NUL", b, got)
		}
		if utf8.Valid(b) && bytes.IndexByte(b, 0) < 0 && got != string(b) {
			t.Fatalf("sanitize changed valid input %q to %q", b, got)
		}
	})
}

func TestCapBuf(t *testing.T) {
	tests := []struct {
		name      string
		max       int
		writes    []string
		want      string
		truncated bool
	}{
		{"fits", 10, []string{"abc", "def"}, "abcdef", false},
		{"exact", 6, []string{"abc", "def"}, "abcdef", false},
		{"head and tail", 6, []string{"abcdefgh", "ij"}, "abc\n[... 4 bytes of output omitted ...]\nhij", true},
		{"many small writes", 4, []string{"1", "2", "3", "4", "5", "6", "7"}, "12\n[... 3 bytes of output omitted ...]\n67", true},
		{"big write", 4, []string{strings.Repeat("x", 1000) + "yz"}, "xx\n[... 998 bytes of output omitted ...]\nyz", true},
		// A cut in the middle of "✓" (3 bytes) drops the partial rune.
		{"rune boundary", 6, []string{"ab✓", "✓", "cd✓"}, "ab\n[... 8 bytes of output omitted ...]\n✓", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCapBuf(tt.max)
			for _, w := range tt.writes {
				c.write([]byte(w))
			}
			if got := c.String(); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
			if c.truncated() != tt.truncated {
				t.Errorf("truncated = %v, want %v", c.truncated(), tt.truncated)
			}
		})
	}
}

// FuzzCapBuf checks the ring against a plain buffer: head and tail are the
// first and last bytes of what was written, however it was split.
func FuzzCapBuf(f *testing.F) {
	f.Add([]byte("hello world, this is output"), 7, uint8(3))
	f.Add([]byte("x"), 1, uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, max int, chunk uint8) {
		if max <= 0 || max > 1<<16 || chunk == 0 {
			return
		}
		c := newCapBuf(max)
		for rest := data; len(rest) > 0; {
			n := min(int(chunk), len(rest))
			c.write(rest[:n])
			rest = rest[n:]
		}
		if len(data) <= max {
			if c.truncated() || c.String() != sanitize(data) {
				t.Fatalf("untruncated output changed: %q -> %q", data, c.String())
			}
			return
		}
		if !c.truncated() {
			t.Fatal("not truncated")
		}
		head, tail := data[:c.headCap()], data[len(data)-max/2:]
		if !bytes.Equal(c.head, head) {
			t.Fatalf("head %q, want %q", c.head, head)
		}
		gotTail := append(append([]byte(nil), c.tail[c.tailPos:]...), c.tail[:c.tailPos]...)
		if !bytes.Equal(gotTail, tail) {
			t.Fatalf("tail %q, want %q", gotTail, tail)
		}
		if !utf8.ValidString(c.String()) {
			t.Fatal("invalid UTF-8")
		}
	})
}

func TestStatusParser(t *testing.T) {
	n1, n2 := newNonce(), newNonce()
	tests := []struct {
		name   string
		chunks []string
		code   int
		ok     bool
	}{
		{"match", []string{n1 + " 7\n"}, 7, true},
		{"split", []string{n1[:5], n1[5:] + " 1", "2\n"}, 12, true},
		{"stale first", []string{n2 + " 1\n" + n1 + " 0\n"}, 0, true},
		{"no newline", []string{n1 + " 0"}, 0, false},
		{"fake", []string{"0000 0\n", strings.Repeat("f", nonceLen) + " 0\n"}, 0, false},
		{"garbage code", []string{n1 + " x\n", n1 + " 300\n", n1 + " -1\n"}, 0, false},
		{"long line then match", []string{strings.Repeat("z", 1000), "\n" + n1 + " 3\n"}, 3, true},
		{"long line hides match", []string{strings.Repeat("z", 1000) + n1 + " 3\n"}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p statusParser
			var code int
			ok := false
			for _, c := range tt.chunks {
				if code, _, ok = p.feed([]byte(c), n1, ""); ok {
					break
				}
			}
			if ok != tt.ok || code != tt.code {
				t.Errorf("got (%d, %v), want (%d, %v)", code, ok, tt.code, tt.ok)
			}
		})
	}
}

func TestANSICQuote(t *testing.T) {
	var b strings.Builder
	ansiCQuote(&b, "a'b\\c\nd!e\x01\xff")
	if got, want := b.String(), `$'a\'b\\c\nd\x21e\x01\xff'`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}
