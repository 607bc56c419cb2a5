package store

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func validManifest() *Manifest {
	return &Manifest{
		Version: ManifestVersion,
		Parents: []LayerID{LayerID(DigestOf([]byte("parent")))},
		Entries: []Entry{
			{Path: ".", Type: TypeDir, Mode: 0o755},
			{Path: "a", Type: TypeDir, Mode: 0o755, Opaque: true},
			{Path: "a/f", Type: TypeFile, Mode: 0o644, UID: 1000, GID: 1000, Size: 3, Digest: DigestOf([]byte("abc")), Mtime: 1700000000000000000},
			{Path: "a/l", Type: TypeSymlink, Mode: 0o777, Target: "f"},
			{Path: "dev", Type: TypeChar, Mode: 0o666, Major: 1, Minor: 3},
			{Path: "gone", Type: TypeDelete},
			{Path: "p\"q\\r\n\xff", Type: TypeFifo, Mode: 0o600},
		},
	}
}

func TestManifestRoundTrip(t *testing.T) {
	m := validManifest()
	b, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	m2, err := DecodeManifest(b)
	if err != nil {
		t.Fatalf("decode: %v\n%s", err, b)
	}
	b2, _ := m2.Encode()
	if !bytes.Equal(b, b2) {
		t.Fatalf("re-encoding differs:\n%s\n%s", b, b2)
	}
	if m2.Entries[6].Path != "p\"q\\r\n\xff" {
		t.Fatalf("non-UTF-8 path came back as %q", m2.Entries[6].Path)
	}
	if !bytes.Contains(b, []byte(`"path_b64"`)) {
		t.Fatal("non-UTF-8 path not stored as path_b64")
	}
}

func TestManifestRejects(t *testing.T) {
	good, _ := validManifest().Encode()
	for _, tc := range []struct {
		name   string
		mutate func(m *Manifest)
		want   error
	}{
		{"version", func(m *Manifest) { m.Version = 3 }, ErrVersion},
		{"no root", func(m *Manifest) { m.Entries = m.Entries[1:] }, ErrBadManifest},
		{"unsorted", func(m *Manifest) { m.Entries[4], m.Entries[5] = m.Entries[5], m.Entries[4] }, ErrBadManifest},
		{"duplicate", func(m *Manifest) { m.Entries[5] = m.Entries[4] }, ErrBadManifest},
		{"dotdot", func(m *Manifest) { m.Entries[4].Path = "../dev" }, ErrBadManifest},
		{"absolute", func(m *Manifest) { m.Entries[4].Path = "/dev" }, ErrBadManifest},
		{"no parent dir", func(m *Manifest) { m.Entries[4].Path = "x/dev" }, ErrBadManifest},
		{"parent is a file", func(m *Manifest) { m.Entries[3].Path = "a/f/l" }, ErrBadManifest},
		{"nul", func(m *Manifest) { m.Entries[4].Path = "d\x00ev" }, ErrBadManifest},
		{"file without digest", func(m *Manifest) { m.Entries[2].Digest = Digest{} }, ErrBadManifest},
		{"mode bits", func(m *Manifest) { m.Entries[2].Mode = 0o100644 }, ErrBadManifest},
		{"opaque file", func(m *Manifest) { m.Entries[2].Opaque = true }, ErrBadManifest},
		{"empty target", func(m *Manifest) { m.Entries[3].Target = "" }, ErrBadManifest},
		{"delete with mode", func(m *Manifest) { m.Entries[5].Mode = 0o644 }, ErrBadManifest},
		{"root deleted", func(m *Manifest) { m.Entries[0] = Entry{Path: ".", Type: TypeDelete} }, ErrBadManifest},
		{"unknown type", func(m *Manifest) { m.Entries[4].Type = "socket" }, ErrBadManifest},
		{"repeated parent", func(m *Manifest) { m.Parents = append(m.Parents, m.Parents[0]) }, ErrBadManifest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := validManifest()
			tc.mutate(m)
			if _, err := m.Encode(); !errors.Is(err, tc.want) {
				t.Fatalf("Encode: %v, want %v", err, tc.want)
			}
		})
	}
	for _, tc := range []struct{ name, old, new string }{
		{"whitespace", `{"version":1,`, `{"version": 1,`},
		{"key order", `"mode":420,"uid":1000`, `"uid":1000,"mode":420`},
		{"unknown key", `"opaque":true`, `"opaque":true,"acl":{}`},
		{"empty xattrs", `"opaque":true`, `"opaque":true,"xattrs":{}`},
		{"version 2 without xattrs", `{"version":1,`, `{"version":2,`},
		{"duplicate key", `"mode":420`, `"mode":420,"mode":420`},
		{"upper hex", `"digest":"sha256:ba`, `"digest":"sha256:BA`},
		{"path_b64 for utf-8", `"path":"gone"`, `"path_b64":"Z29uZQ=="`},
		{"default written", `{"path":"gone","type":"delete"}`, `{"path":"gone","type":"delete","mode":0}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !bytes.Contains(good, []byte(tc.old)) {
				t.Fatalf("fixture lacks %s in %s", tc.old, good)
			}
			bad := bytes.Replace(good, []byte(tc.old), []byte(tc.new), 1)
			if _, err := DecodeManifest(bad); err == nil {
				t.Fatalf("accepted %s", bad)
			}
		})
	}
}

func FuzzDecodeManifest(f *testing.F) {
	good, _ := validManifest().Encode()
	f.Add(good)
	f.Add([]byte(`{"version":1,"entries":[{"path":".","type":"dir","mode":493,"uid":0,"gid":0}]}` + "\n"))
	f.Add([]byte(`{"version":1,"entries":[]}`))
	f.Add([]byte(`{"version":2,"entries":[{"path":".","type":"dir","mode":493,"uid":0,"gid":0,"xattrs":{"user.a":"AA=="}}]}` + "\n"))
	f.Add([]byte(strings.Repeat("[", 1000)))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := DecodeManifest(data)
		if err != nil {
			return
		}
		// Accepted input is canonical: it re-encodes to itself, and its
		// digest is the layer ID.
		b, err := m.Encode()
		if err != nil {
			t.Fatalf("decoded manifest does not encode: %v", err)
		}
		if !bytes.Equal(b, data) {
			t.Fatalf("accepted non-canonical input:\n%q\n%q", data, b)
		}
		if id, _ := m.ID(); id != LayerID(DigestOf(data)) {
			t.Fatal("ID is not the digest of the encoding")
		}
		for _, e := range m.Entries {
			if !validPath(e.Path) || strings.Contains("/"+e.Path+"/", "/../") {
				t.Fatalf("unsafe path accepted: %q", e.Path)
			}
		}
	})
}

func TestDigestParse(t *testing.T) {
	d := DigestOf([]byte("x"))
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{d.String(), true},
		{d.Hex(), false},
		{"sha256:" + strings.ToUpper(d.Hex()), false},
		{"sha256:" + d.Hex()[:63], false},
		{"sha512:" + d.Hex(), false},
		{"sha256:" + d.Hex()[:63] + "g", false},
	} {
		got, err := ParseDigest(tc.in)
		if tc.ok != (err == nil) || (tc.ok && got != d) {
			t.Errorf("ParseDigest(%q) = %s, %v", tc.in, got, err)
		}
		if !tc.ok && !errors.Is(err, ErrBadDigest) {
			t.Errorf("ParseDigest(%q): %v, want ErrBadDigest", tc.in, err)
		}
	}
	k := inodeKey{digest: d, mode: 0o4755, uid: 1, gid: 2, mtime: 5}
	if got, err := parseInodeName(k.name()); err != nil || got != k {
		t.Errorf("inode name round trip: %v %v", got, err)
	}
}

// capV2 is a version 2 security.capability value granting
// cap_net_bind_service (bit 10) permitted and effective.
var capV2 = []byte{0x01, 0x00, 0x00, 0x02, 0x00, 0x04, 0x00, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}

// TestManifestXattrs: extended attributes make a version 2 manifest, which
// round-trips; a manifest without them stays version 1 (every older layer
// keeps its digest); names outside the allowed namespaces, overlay
// markers, unsorted or repeated names and xattrs on deletions are refused,
// and so are non-canonical spellings.
func TestManifestXattrs(t *testing.T) {
	plain, _ := validManifest().Encode()
	if !bytes.HasPrefix(plain, []byte(`{"version":1,`)) {
		t.Fatalf("manifest without xattrs is not version 1: %s", plain)
	}
	withX := func() *Manifest {
		m := validManifest()
		m.Entries[1].Xattrs = []Xattr{{Name: "trusted.note", Value: []byte("d")}, {Name: "user.mime", Value: []byte("text/x-dir")}}
		m.Entries[2].Xattrs = []Xattr{{Name: "security.capability", Value: capV2}, {Name: "user.k", Value: []byte{0, 0xff}}}
		return m
	}
	b, err := withX().Encode()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte(`{"version":2,`)) || !bytes.Contains(b, []byte(`"xattrs":{"security.capability":"AQAAAgAEAAAAAAAAAAAAAAAAAAA=","user.k":"AP8="}`)) {
		t.Fatalf("encoding: %s", b)
	}
	m2, err := DecodeManifest(b)
	if err != nil {
		t.Fatalf("decode: %v\n%s", err, b)
	}
	if b2, _ := m2.Encode(); !bytes.Equal(b, b2) {
		t.Fatalf("re-encoding differs:\n%s\n%s", b, b2)
	}
	if x := m2.Entries[2].Xattrs; len(x) != 2 || x[0].Name != "security.capability" || !bytes.Equal(x[0].Value, capV2) {
		t.Fatalf("decoded xattrs %v", x)
	}
	for _, tc := range []struct {
		name   string
		mutate func(m *Manifest)
	}{
		{"overlay marker trusted", func(m *Manifest) {
			m.Entries[1].Xattrs = []Xattr{{Name: "trusted.overlay.redirect", Value: []byte("/x")}}
		}},
		{"overlay marker user", func(m *Manifest) { m.Entries[1].Xattrs = []Xattr{{Name: "user.overlay.opaque", Value: []byte("y")}} }},
		{"selinux", func(m *Manifest) { m.Entries[2].Xattrs = []Xattr{{Name: "security.selinux", Value: []byte("x")}} }},
		{"acl", func(m *Manifest) {
			m.Entries[2].Xattrs = []Xattr{{Name: "system.posix_acl_access", Value: []byte("x")}}
		}},
		{"bare namespace", func(m *Manifest) { m.Entries[2].Xattrs = []Xattr{{Name: "user.", Value: []byte("x")}} }},
		{"unsorted", func(m *Manifest) {
			m.Entries[2].Xattrs[0], m.Entries[2].Xattrs[1] = m.Entries[2].Xattrs[1], m.Entries[2].Xattrs[0]
		}},
		{"repeated", func(m *Manifest) { m.Entries[2].Xattrs[1] = m.Entries[2].Xattrs[0] }},
		{"on a deletion", func(m *Manifest) { m.Entries[5].Xattrs = []Xattr{{Name: "user.a", Value: nil}} }},
		{"value too long", func(m *Manifest) { m.Entries[2].Xattrs[1].Value = make([]byte, 64*1024+1) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := withX()
			tc.mutate(m)
			if _, err := m.Encode(); !errors.Is(err, ErrBadManifest) {
				t.Fatalf("Encode: %v, want ErrBadManifest", err)
			}
		})
	}
	for _, tc := range []struct{ name, old, new string }{
		{"version 1 with xattrs", `{"version":2,`, `{"version":1,`},
		{"names out of order", `"security.capability":"AQAAAgAEAAAAAAAAAAAAAAAAAAA=","user.k":"AP8="`, `"user.k":"AP8=","security.capability":"AQAAAgAEAAAAAAAAAAAAAAAAAAA="`},
		{"unpadded base64", `"user.k":"AP8="`, `"user.k":"AP8"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !bytes.Contains(b, []byte(tc.old)) {
				t.Fatalf("fixture lacks %s in %s", tc.old, b)
			}
			if _, err := DecodeManifest(bytes.Replace(b, []byte(tc.old), []byte(tc.new), 1)); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}
