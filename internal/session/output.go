package session

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// capBuf collects one stream of a command's output with bounded memory. It
// keeps the first half of the cap (head) and the last half (tail, a ring) and
// counts what falls in between, so a command that prints 100 MB costs at most
// max bytes here.
type capBuf struct {
	max     int
	head    []byte
	tail    []byte // ring of at most max-len(head) bytes once head is full
	tailPos int    // next write position in tail once it is full
	total   int64
}

func newCapBuf(max int) capBuf { return capBuf{max: max} }

func (c *capBuf) headCap() int { return c.max - c.max/2 }

func (c *capBuf) write(p []byte) {
	c.total += int64(len(p))
	if n := c.headCap() - len(c.head); n > 0 {
		n = min(n, len(p))
		c.head = append(c.head, p[:n]...)
		p = p[n:]
	}
	tailCap := c.max / 2
	if tailCap == 0 || len(p) == 0 {
		return
	}
	if len(p) >= tailCap {
		// Only the last tailCap bytes can survive.
		c.tail = append(c.tail[:0], p[len(p)-tailCap:]...)
		c.tailPos = 0
		return
	}
	if room := tailCap - len(c.tail); room > 0 {
		n := min(room, len(p))
		c.tail = append(c.tail, p[:n]...)
		p = p[n:]
	}
	for len(p) > 0 { // ring is full: overwrite the oldest bytes
		n := copy(c.tail[c.tailPos:], p)
		p = p[n:]
		c.tailPos = (c.tailPos + n) % len(c.tail)
	}
}

// truncated reports whether bytes were dropped.
func (c *capBuf) truncated() bool { return c.total > int64(len(c.head)+len(c.tail)) }

// String returns the collected output as valid UTF-8 (see sanitize). When the
// output exceeded the cap, the head and the tail are joined by a line that
// says how many bytes were left out; the cut never splits a UTF-8 sequence.
func (c *capBuf) String() string {
	tail := make([]byte, 0, len(c.tail))
	tail = append(tail, c.tail[c.tailPos:]...)
	tail = append(tail, c.tail[:c.tailPos]...)
	if !c.truncated() {
		return sanitize(append(c.head[:len(c.head):len(c.head)], tail...))
	}
	head := trimPartialRuneEnd(c.head)
	cutTail := trimPartialRuneStart(tail)
	dropped := c.total - int64(len(head)) - int64(len(cutTail))
	var b strings.Builder
	b.WriteString(sanitize(head))
	fmt.Fprintf(&b, "\n[... %d bytes of output omitted ...]\n", dropped)
	b.WriteString(sanitize(cutTail))
	return b.String()
}

// trimPartialRuneEnd drops an incomplete UTF-8 sequence at the end of b.
func trimPartialRuneEnd(b []byte) []byte {
	for i := 1; i <= utf8.UTFMax-1 && i <= len(b); i++ {
		c := b[len(b)-i]
		if c < utf8.RuneSelf {
			return b // ASCII: nothing pending
		}
		if utf8.RuneStart(c) {
			if !utf8.FullRune(b[len(b)-i:]) {
				return b[:len(b)-i]
			}
			return b
		}
	}
	return b
}

// trimPartialRuneStart drops UTF-8 continuation bytes at the start of b.
func trimPartialRuneStart(b []byte) []byte {
	for i := 0; i < utf8.UTFMax-1 && i < len(b); i++ {
		if utf8.RuneStart(b[i]) {
			return b[i:]
		}
	}
	if len(b) >= utf8.UTFMax-1 {
		return b[utf8.UTFMax-1:]
	}
	return b[len(b):]
}

// sanitize returns b as a string that is valid UTF-8 and holds no NUL, so it
// survives JSON and C-string consumers unchanged: every byte that is not part
// of a valid UTF-8 sequence, and every NUL byte, becomes the four characters
// \xNN (lowercase hex). Backslashes already in the output are left alone, so
// the mapping is not reversible; it is meant for reading, not for recovering
// binary data.
func sanitize(b []byte) string {
	if utf8.Valid(b) && !containsNUL(b) {
		return string(b)
	}
	const hex = "0123456789abcdef"
	var s strings.Builder
	s.Grow(len(b) + len(b)/4)
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		switch {
		case r == utf8.RuneError && n == 1, r == 0:
			s.WriteString(`\x`)
			s.WriteByte(hex[b[0]>>4])
			s.WriteByte(hex[b[0]&0xf])
		default:
			s.Write(b[:n])
		}
		b = b[n:]
	}
	return s.String()
}

func containsNUL(b []byte) bool {
	for _, c := range b {
		if c == 0 {
			return true
		}
	}
	return false
}
