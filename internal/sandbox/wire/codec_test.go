package wire

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/session"
)

// fill sets every exported field of the value v points to, nested ones
// too, to a value that is not its zero (seed tells the values apart), and
// gives slices two elements: a field the binary encoding forgot then
// fails the round trips below.
func fill(v reflect.Value, seed *int) {
	*seed++
	n := *seed
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), seed)
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if !f.IsExported() || f.Tag.Get("json") == "-" {
				continue
			}
			fill(v.Field(i), seed)
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			v.SetBytes([]byte{byte(n), 0, 0xff, byte(n >> 8)})
			return
		}
		s := reflect.MakeSlice(v.Type(), 2, 2)
		fill(s.Index(0), seed)
		fill(s.Index(1), seed)
		v.Set(s)
	case reflect.String:
		v.SetString(fmt.Sprintf("s%d ü \x00 \"", n))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64:
		v.SetInt(-int64(n) * 1e12)
		if v.Type() == reflect.TypeFor[int]() {
			v.SetInt(-int64(n))
		}
	case reflect.Uint16:
		v.SetUint(uint64(n))
	case reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(n) << 20)
	case reflect.Func:
	default:
		panic(fmt.Sprintf("fill: a field of kind %s", v.Kind()))
	}
}

// roundTrip writes v as one frame with its binary encoding and reads it
// back into a new value of its type.
func roundTrip[T any](t *testing.T, v T) T {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteFrame(&buf, v); err != nil {
		t.Fatal(err)
	}
	if b := buf.Bytes(); len(b) < 5 || b[4] != BinaryV1 {
		t.Fatalf("%T was not written binary: % x", v, b[:min(len(b), 8)])
	}
	var got T
	if err := ReadFrame(&buf, &got); err != nil {
		t.Fatalf("reading %T back: %v", v, err)
	}
	return got
}

// viaJSON is what a JSON frame of v decodes to.
func viaJSON[T any](t *testing.T, v T) T {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var got T
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	return got
}

// TestBinaryRoundTrip: every field of every message type (filled by
// reflection) comes back as written, and as a JSON frame of the same value
// decodes (valid UTF-8 strings: JSON would replace other bytes); the zero
// value and the slices whose nil and empty differ (Config.Env, Lowers) too.
func TestBinaryRoundTrip(t *testing.T) {
	check := func(t *testing.T, name string, got, want, json any) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: binary round trip\n got %+v\nwant %+v", name, got, want)
		}
		if !reflect.DeepEqual(got, json) {
			t.Errorf("%s: binary and JSON decode differently\nbinary %+v\n  json %+v", name, got, json)
		}
	}
	seed := 0
	var req Request
	fill(reflect.ValueOf(&req).Elem(), &seed)
	got := roundTrip(t, req)
	if !got.Binary() {
		t.Error("a request decoded from a binary frame does not say so")
	}
	got.binary = false
	check(t, "Request", got, req, viaJSON(t, req))

	var resp Response
	fill(reflect.ValueOf(&resp).Elem(), &seed)
	check(t, "Response", roundTrip(t, resp), resp, viaJSON(t, resp))

	var cfg Config
	fill(reflect.ValueOf(&cfg).Elem(), &seed)
	gotCfg := roundTrip(t, cfg)
	if !gotCfg.Binary() {
		t.Error("a config decoded from a binary frame does not say so")
	}
	if j := viaJSON(t, cfg); j.Binary() {
		t.Error("a config decoded from JSON (an older host's) says it came binary")
	}
	gotCfg.binary = false
	check(t, "Config", gotCfg, cfg, viaJSON(t, cfg))

	for _, c := range []Config{{}, {Env: []string{}, Lowers: []string{}}, {Env: []string{""}}, {Session: &SessionStart{}, Disk: &Disk{}}} {
		got := roundTrip(t, c)
		got.binary = false
		check(t, fmt.Sprintf("Config %+v", c), got, c, viaJSON(t, c))
	}
	for _, r := range []Response{{}, {Result: &session.Result{}}, {Execs: &Execs{}}, {Entries: []Entry{{}}}} {
		check(t, fmt.Sprintf("Response %+v", r), roundTrip(t, r), r, viaJSON(t, r))
	}
	r := Request{ID: AdoptID, Exec: &session.ExecRequest{Timeout: -time.Second}, Owner: &FileOwner{}}
	got = roundTrip(t, r)
	got.binary = false
	check(t, "Request", got, r, viaJSON(t, r))

	// Bytes JSON cannot carry in a string arrive as they were.
	odd := Request{Path: "/a/\xff\xfe", Exec: &session.ExecRequest{Command: "printf '\x80'"}}
	if got := roundTrip(t, odd); got.Path != odd.Path || got.Exec.Command != odd.Exec.Command {
		t.Errorf("invalid UTF-8: got %q, %q", got.Path, got.Exec.Command)
	}
}

// TestBinaryLongMessage: a nested message longer than one length byte
// holds (enc.msg moves its body for the longer length).
func TestBinaryLongMessage(t *testing.T) {
	for _, n := range []int{0x7f, 0x80, 0x3fff, 0x4000, 1 << 20} {
		r := Response{Result: &session.Result{Output: string(bytes.Repeat([]byte("x"), n)), ExitCode: 3}, Exit: 1}
		got := roundTrip(t, r)
		if !reflect.DeepEqual(got, r) {
			t.Fatalf("%d bytes of output: got %d bytes, exit %d", n, len(got.Result.Output), got.Result.ExitCode)
		}
	}
}

// TestBinarySkipsUnknownFields: fields a newer peer adds (numbers this
// decoder does not know, of either kind, also inside a nested message)
// are skipped.
func TestBinarySkipsUnknownFields(t *testing.T) {
	e := enc{b: []byte{BinaryV1}}
	e.uint(1, 7)
	e.uint(99, 5)
	e.str(100, "later")
	e.msg(14, func(e *enc) { e.str(1, "true"); e.msg(50, func(e *enc) { e.int(1, -1) }) })
	e.str(2, OpSessionExec)
	var r Request
	if err := decode(e.b, &r); err != nil {
		t.Fatal(err)
	}
	if r.ID != 7 || r.Op != OpSessionExec || r.Exec == nil || r.Exec.Command != "true" {
		t.Fatalf("got %+v", r)
	}
}

// TestBinaryMalformed: a body cut anywhere, a field of the wrong kind and
// a binary frame for a type without a binary encoding are errors, not
// panics or silent values.
func TestBinaryMalformed(t *testing.T) {
	var buf bytes.Buffer
	WriteFrame(&buf, Response{ID: 3, Result: &session.Result{Output: "out"}, Info: &Ready{Stamps: []Stamp{{Step: "a", Mono: 1}}}})
	body := buf.Bytes()[4:]
	for i := 2; i < len(body); i++ {
		var r Response
		if err := decode(body[:i], &r); err == nil && !bytes.Equal(body[:i], body) {
			// A cut between two top-level fields is a shorter valid message.
			var again bytes.Buffer
			WriteFrame(&again, r)
			if !bytes.HasPrefix(body, again.Bytes()[4:]) {
				t.Errorf("cut at %d of %d: decoded %+v without error", i, len(body), r)
			}
		}
	}
	e := enc{b: []byte{BinaryV1}}
	e.str(1, "an ID as a string")
	if err := decode(e.b, &Request{}); err == nil {
		t.Error("a field of the wrong kind decoded")
	}
	var fo FileOwner
	if err := decode([]byte{BinaryV1, 8, 1}, &fo); err == nil {
		t.Error("a binary frame decoded into a type without a binary encoding")
	}
}

// TestWriterFollowsPeer: a Writer writes binary frames until SetBinary(false),
// then JSON, which every msb reads; a type without a binary encoding is
// JSON either way.
func TestWriterFollowsPeer(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	first := func() byte {
		b := buf.Bytes()
		if n := binary.BigEndian.Uint32(b); int(n) != len(b)-4 {
			t.Fatalf("frame length %d, body %d bytes", n, len(b)-4)
		}
		c := b[4]
		buf.Reset()
		return c
	}
	w.Write(Response{ID: 1})
	if c := first(); c != BinaryV1 {
		t.Errorf("first byte %q, want binary", c)
	}
	w.SetBinary(false)
	w.Write(Response{ID: 1})
	if c := first(); c != '{' {
		t.Errorf("first byte %q after SetBinary(false), want JSON", c)
	}
	w.SetBinary(true)
	w.Write(FileOwner{UID: 1})
	if c := first(); c != '{' {
		t.Errorf("first byte %q of a FileOwner, want JSON", c)
	}
}

func FuzzDecodeBinary(f *testing.F) {
	var buf bytes.Buffer
	WriteFrame(&buf, Request{ID: 1, Op: OpSessionExec, Exec: &session.ExecRequest{Command: "true", Expect: []string{"x"}}, Owner: &FileOwner{UID: 1}})
	f.Add(buf.Bytes()[4:])
	buf.Reset()
	WriteFrame(&buf, Config{Env: []string{"A=1"}, Binds: []Bind{{Source: "/a"}}, Cgroup: &CgroupFS{Hierarchies: []CgroupHierarchy{{Dir: "memory"}}}})
	f.Add(buf.Bytes()[4:])
	f.Fuzz(func(t *testing.T, b []byte) {
		b = append([]byte{BinaryV1}, b...)
		var r Request
		_ = decode(b, &r)
		var resp Response
		_ = decode(b, &resp)
		var c Config
		_ = decode(b, &c)
	})
}
