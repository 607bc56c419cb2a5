package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// The binary encoding of a frame's body, beside JSON.
//
// A body that starts with '{' is JSON, the protocol's first encoding,
// which every msb speaks. A body that starts with BinaryV1 is the binary
// encoding of the message types that have one (Config, Request, Response
// and what they hold): every process decodes both, and writes binary to a
// peer known to read it. The host knows that of the init it starts (its
// own build); a supervisor restored from a dump may be older, so a host
// adopting one writes JSON until the supervisor's answer to OpExecs says
// it reads binary (Execs.Binary), and a supervisor answers in the
// encoding of the last request it read and, before its first, of its
// Config (an older host reads only JSON: a daemon of an earlier msb may
// start a newer msb-sandbox, replaced beside it by an upgrade).
// A new encoding takes the next version byte; a change within this one
// adds fields under new numbers, which an older decoder skips.
//
// The encoding, after its version byte, is a sequence of fields, each a
// key (uvarint: field number << 3 | kind) and a value: kind 0 a uvarint
// (unsigned numbers, booleans as 1, signed numbers zigzag-encoded), kind
// 2 a uvarint length and that many bytes (strings, byte slices, nested
// messages). A field at its zero value is left out; a slice is its field
// repeated, one element each; a nested message present is its field even
// when empty (a non-nil pointer). Decoding JSON builds each type's codec
// by reflection in every process that uses it, which a sandbox's
// supervisor, a new process each time, paid on every start (docs/bench.md,
// session 19).
const BinaryV1 = 0x01

const (
	kindVarint = 0
	kindBytes  = 2
)

// errTruncated says a binary body ended inside a field.
var errTruncated = errors.New("binary frame ends inside a field")

// enc appends fields to b.
type enc struct{ b []byte }

func (e *enc) key(f, kind int) { e.b = binary.AppendUvarint(e.b, uint64(f)<<3|uint64(kind)) }

func (e *enc) uint(f int, v uint64) {
	if v != 0 {
		e.key(f, kindVarint)
		e.b = binary.AppendUvarint(e.b, v)
	}
}

func (e *enc) int(f int, v int64) { e.uint(f, uint64(v<<1)^uint64(v>>63)) }

func (e *enc) bool(f int, v bool) {
	if v {
		e.uint(f, 1)
	}
}

func (e *enc) str(f int, s string) {
	if s != "" {
		e.key(f, kindBytes)
		e.b = binary.AppendUvarint(e.b, uint64(len(s)))
		e.b = append(e.b, s...)
	}
}

func (e *enc) bytes(f int, p []byte) {
	if len(p) > 0 {
		e.key(f, kindBytes)
		e.b = binary.AppendUvarint(e.b, uint64(len(p)))
		e.b = append(e.b, p...)
	}
}

func (e *enc) strs(f int, ss []string) {
	for _, s := range ss {
		e.key(f, kindBytes)
		e.b = binary.AppendUvarint(e.b, uint64(len(s)))
		e.b = append(e.b, s...)
	}
}

// list writes ss as one nested message of its elements (field 1 each),
// present when ss is not nil: for a slice whose nil and empty differ (an
// environment: nil inherits, empty is none), as they do in JSON without
// omitempty.
func (e *enc) list(f int, ss []string) {
	if ss != nil {
		e.msg(f, func(e *enc) { e.strs(1, ss) })
	}
}

// msg writes the nested message body writes as field f, present even
// when empty.
func (e *enc) msg(f int, body func(*enc)) {
	e.key(f, kindBytes)
	at := len(e.b)
	e.b = append(e.b, 0) // the length, one byte for most messages
	body(e)
	n := len(e.b) - at - 1
	if n < 0x80 {
		e.b[at] = byte(n)
		return
	}
	var l [binary.MaxVarintLen64]byte
	k := binary.PutUvarint(l[:], uint64(n))
	e.b = append(e.b, l[:k-1]...) // room for the longer length
	copy(e.b[at+k:], e.b[at+1:at+1+n])
	copy(e.b[at:], l[:k])
}

// dec reads the fields of one message: for d.next() { switch d.f { ... } }
// with d.skip() for a field it does not know. The first error sticks and
// ends the loop.
type dec struct {
	b    []byte
	f    int
	kind int
	err  error
}

func (d *dec) fail(err error) {
	if d.err == nil {
		d.err = err
	}
	d.b = nil
}

func (d *dec) next() bool {
	if d.err != nil || len(d.b) == 0 {
		return false
	}
	k := d.uvarint()
	if d.err != nil {
		return false
	}
	if k>>3 == 0 || k>>3 > math.MaxInt32 {
		d.fail(fmt.Errorf("binary frame has a field numbered %d", k>>3))
		return false
	}
	d.f, d.kind = int(k>>3), int(k&7)
	if d.kind != kindVarint && d.kind != kindBytes {
		d.fail(fmt.Errorf("binary frame's field %d has unknown kind %d", d.f, d.kind))
		return false
	}
	return true
}

func (d *dec) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail(errTruncated)
		return 0
	}
	d.b = d.b[n:]
	return v
}

// want checks that the current field has the kind its type needs.
func (d *dec) want(kind int) bool {
	if d.kind != kind {
		d.fail(fmt.Errorf("binary frame's field %d has kind %d, want %d", d.f, d.kind, kind))
		return false
	}
	return true
}

func (d *dec) uint() uint64 {
	if !d.want(kindVarint) {
		return 0
	}
	return d.uvarint()
}

func (d *dec) int64() int64 {
	u := d.uint()
	return int64(u>>1) ^ -int64(u&1)
}

func (d *dec) int() int      { return int(d.int64()) }
func (d *dec) bool() bool    { return d.uint() != 0 }
func (d *dec) str() string   { return string(d.raw()) }
func (d *dec) bytes() []byte { return append([]byte(nil), d.raw()...) }

// raw returns the bytes of a length-delimited field, in d's buffer.
func (d *dec) raw() []byte {
	if !d.want(kindBytes) {
		return nil
	}
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.fail(errTruncated)
		return nil
	}
	p := d.b[:n]
	d.b = d.b[n:]
	return p
}

// msg decodes the current field as a nested message with body.
func (d *dec) msg(body func(*dec)) {
	p := d.raw()
	if d.err != nil {
		return
	}
	sub := dec{b: p}
	body(&sub)
	if sub.err != nil {
		d.fail(sub.err)
	}
}

// list decodes what enc.list wrote: never nil.
func (d *dec) list() []string {
	ss := []string{}
	d.msg(func(d *dec) {
		for d.next() {
			if d.f == 1 {
				ss = append(ss, d.str())
			} else {
				d.skip()
			}
		}
	})
	return ss
}

// skip passes over a field this decoder does not know (a newer peer's).
func (d *dec) skip() {
	switch d.kind {
	case kindVarint:
		d.uvarint()
	case kindBytes:
		d.raw()
	}
}
