package demotest

import (
	"archive/tar"
	"bytes"
	"io"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// An Entry is one tar entry of a test image layer, written as given (a
// hostile path stays hostile): the tests of import, export and image
// sandboxes make their layers of these.
type Entry struct {
	Name     string
	Type     byte // tar.TypeReg, TypeDir, TypeSymlink, TypeLink, ...
	Body     string
	Link     string
	Mode     int64
	UID, GID int
	Xattrs   map[string]string // written as PAX SCHILY.xattr records
}

// File is a regular file entry, mode 0644.
func File(name, body string) Entry {
	return Entry{Name: name, Type: tar.TypeReg, Body: body, Mode: 0o644}
}

// Dir is a directory entry, mode 0755.
func Dir(name string) Entry { return Entry{Name: name, Type: tar.TypeDir, Mode: 0o755} }

// Symlink is a symbolic link entry.
func Symlink(name, target string) Entry {
	return Entry{Name: name, Type: tar.TypeSymlink, Link: target, Mode: 0o777}
}

// LayerTar writes entries as an uncompressed tar; only regular files carry
// their Body.
func LayerTar(t testing.TB, ents []Entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range ents {
		h := &tar.Header{Name: e.Name, Typeflag: e.Type, Mode: e.Mode, Uid: e.UID, Gid: e.GID, Linkname: e.Link, Format: tar.FormatPAX}
		if e.Type == tar.TypeReg {
			h.Size = int64(len(e.Body))
		}
		for k, v := range e.Xattrs {
			if h.PAXRecords == nil {
				h.PAXRecords = map[string]string{}
			}
			h.PAXRecords["SCHILY.xattr."+k] = v
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if e.Type == tar.TypeReg {
			if _, err := io.WriteString(tw, e.Body); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// EntriesLayer is an image layer of the entries.
func EntriesLayer(t testing.TB, ents []Entry) v1.Layer {
	t.Helper()
	return BytesLayer(t, LayerTar(t, ents))
}
