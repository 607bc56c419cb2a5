package store

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Manifest format versions. Version 2 adds extended attributes ("xattrs")
// and is written only for a manifest that has some, so every layer without
// them keeps the digest it had under version 1.
const (
	ManifestVersion       = 1
	ManifestVersionXattrs = 2
)

// maxPathLen bounds entry paths and symlink targets (PATH_MAX).
const maxPathLen = 4096

// EntryType is the kind of a manifest entry.
type EntryType string

// Entry types. TypeDelete is not a file: it says the path is removed from the
// layers below (an overlay whiteout in the upper dir the layer was committed from).
const (
	TypeFile    EntryType = "file"
	TypeDir     EntryType = "dir"
	TypeSymlink EntryType = "symlink"
	TypeChar    EntryType = "char"
	TypeBlock   EntryType = "block"
	TypeFifo    EntryType = "fifo"
	TypeDelete  EntryType = "delete"
)

func (t EntryType) valid() bool {
	switch t {
	case TypeFile, TypeDir, TypeSymlink, TypeChar, TypeBlock, TypeFifo, TypeDelete:
		return true
	}
	return false
}

// Entry is one path of a layer.
type Entry struct {
	// Path is slash-separated and relative to the layer root, without "." or
	// ".." elements; the root itself is ".". It may hold any bytes but NUL.
	Path string
	Type EntryType
	// Mode holds the permission bits plus setuid, setgid and sticky (07777).
	Mode uint32
	// UID and GID are the owner inside the sandbox. A rootless store
	// materializes every entry as owned by the caller instead.
	UID, GID uint32
	// Size and Digest describe a file's content (TypeFile only).
	Size   int64
	Digest Digest
	// Target is a symlink's target (TypeSymlink only).
	Target string
	// Major and Minor are a device's numbers (TypeChar and TypeBlock only).
	Major, Minor uint32
	// Opaque marks a directory that hides the contents of the same directory
	// in the layers below (TypeDir only).
	Opaque bool
	// Mtime is the modification time in Unix nanoseconds, or 0 when the
	// layer does not record times.
	Mtime int64
	// Xattrs are the entry's extended attributes, sorted by name (see
	// ValidXattrName for the names allowed); not on deletions.
	Xattrs []Xattr
}

// Manifest lists a layer's entries. Its canonical encoding (Encode) is what
// the layer digest is computed over.
type Manifest struct {
	Version int
	// Parents are the layers this one was built on, topmost first. The
	// overlay stack of a layer is the layer followed by its parents' stacks.
	Parents []LayerID
	// Entries are sorted by path (the root "." first, then byte order), so
	// a directory always precedes what it contains.
	Entries []Entry
}

// ID returns the layer digest: the digest of the canonical encoding.
func (m *Manifest) ID() (LayerID, error) {
	b, err := m.Encode()
	if err != nil {
		return LayerID{}, err
	}
	return LayerID(DigestOf(b)), nil
}

// pathLess orders entry paths: "." first, then bytewise. A path is a prefix
// of its descendants, so parents sort before children.
func pathLess(a, b string) bool {
	if a == b {
		return false
	}
	if a == "." {
		return true
	}
	if b == "." {
		return false
	}
	return a < b
}

// validPath reports whether p is a clean relative entry path.
func validPath(p string) bool {
	if p == "." {
		return true
	}
	if p == "" || len(p) > maxPathLen || strings.IndexByte(p, 0) >= 0 {
		return false
	}
	for seg := range strings.SplitSeq(p, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return false
		}
	}
	return true
}

func parentPath(p string) string {
	i := strings.LastIndexByte(p, '/')
	if i < 0 {
		return "."
	}
	return p[:i]
}

// formatVersion is the version m's encoding has: 2 when an entry has
// extended attributes, else 1.
func (m *Manifest) formatVersion() int {
	for i := range m.Entries {
		if len(m.Entries[i].Xattrs) > 0 {
			return ManifestVersionXattrs
		}
	}
	return ManifestVersion
}

// Validate checks the manifest's structural rules (see docs/store-format.md).
// Version is 1 or 2; the encoding writes the one the entries need.
func (m *Manifest) Validate() error {
	if m.Version != ManifestVersion && m.Version != ManifestVersionXattrs {
		return fmt.Errorf("%w: manifest version %d (want %d or %d)", ErrVersion, m.Version, ManifestVersion, ManifestVersionXattrs)
	}
	seenParent := make(map[LayerID]bool, len(m.Parents))
	for _, p := range m.Parents {
		if Digest(p).IsZero() || seenParent[p] {
			return fmt.Errorf("%w: zero or repeated parent %s", ErrBadManifest, p)
		}
		seenParent[p] = true
	}
	if len(m.Entries) == 0 || m.Entries[0].Path != "." {
		return fmt.Errorf("%w: first entry must be the root \".\"", ErrBadManifest)
	}
	dirs := make(map[string]bool)
	for i := range m.Entries {
		e := &m.Entries[i]
		if err := e.validate(); err != nil {
			return err
		}
		if i > 0 {
			if !pathLess(m.Entries[i-1].Path, e.Path) {
				return fmt.Errorf("%w: entries not sorted or repeated at %q", ErrBadManifest, e.Path)
			}
			if !dirs[parentPath(e.Path)] {
				return fmt.Errorf("%w: %q has no parent directory entry", ErrBadManifest, e.Path)
			}
		}
		if e.Type == TypeDir {
			dirs[e.Path] = true
		}
	}
	return nil
}

func (e *Entry) validate() error {
	bad := func(why string) error {
		return fmt.Errorf("%w: entry %q: %s", ErrBadManifest, e.Path, why)
	}
	if !validPath(e.Path) {
		return bad("path is not clean and relative")
	}
	if !e.Type.valid() {
		return bad(fmt.Sprintf("unknown type %q", e.Type))
	}
	if e.Mode&^0o7777 != 0 {
		return bad("mode has bits outside 07777")
	}
	if e.Path == "." && e.Type != TypeDir {
		return bad("root must be a directory")
	}
	if e.Type != TypeFile && (e.Size != 0 || !e.Digest.IsZero()) {
		return bad("size or digest on a non-file")
	}
	if e.Type == TypeFile && (e.Size < 0 || e.Digest.IsZero()) {
		return bad("file without digest or with negative size")
	}
	if e.Type == TypeSymlink {
		if e.Target == "" || len(e.Target) > maxPathLen || strings.IndexByte(e.Target, 0) >= 0 {
			return bad("symlink target empty, too long or with NUL")
		}
	} else if e.Target != "" {
		return bad("target on a non-symlink")
	}
	if e.Type != TypeChar && e.Type != TypeBlock && (e.Major != 0 || e.Minor != 0) {
		return bad("device numbers on a non-device")
	}
	if e.Type != TypeDir && e.Opaque {
		return bad("opaque on a non-directory")
	}
	if e.Type == TypeDelete && (e.Mode != 0 || e.UID != 0 || e.GID != 0 || e.Mtime != 0) {
		return bad("metadata on a deletion")
	}
	if e.Mtime < 0 {
		return bad("negative mtime")
	}
	if err := e.validXattrs(); err != nil {
		return bad(err.Error())
	}
	return nil
}

// Encode returns the canonical JSON encoding: the version the entries need
// (formatVersion), fixed key order, no
// insignificant whitespace, zero-valued optional keys left out, paths and
// targets that are not valid UTF-8 stored base64 under "path_b64" and
// "target_b64". It validates the manifest first.
func (m *Manifest) Encode() ([]byte, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	b := make([]byte, 0, 64+len(m.Entries)*128)
	b = append(b, `{"version":`...)
	b = strconv.AppendInt(b, int64(m.formatVersion()), 10)
	if len(m.Parents) > 0 {
		b = append(b, `,"parents":[`...)
		for i, p := range m.Parents {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, '"')
			b = append(b, p.String()...)
			b = append(b, '"')
		}
		b = append(b, ']')
	}
	b = append(b, `,"entries":[`...)
	for i := range m.Entries {
		if i > 0 {
			b = append(b, ',')
		}
		b = m.Entries[i].appendJSON(b)
	}
	b = append(b, "]}\n"...)
	return b, nil
}

func (e *Entry) appendJSON(b []byte) []byte {
	b = appendStringField(b, "path", e.Path, true)
	b = append(b, `,"type":"`...)
	b = append(b, e.Type...)
	b = append(b, '"')
	if e.Type == TypeDelete {
		return append(b, '}')
	}
	b = appendUintField(b, "mode", uint64(e.Mode))
	b = appendUintField(b, "uid", uint64(e.UID))
	b = appendUintField(b, "gid", uint64(e.GID))
	if e.Type == TypeFile {
		b = append(b, `,"size":`...)
		b = strconv.AppendInt(b, e.Size, 10)
		b = append(b, `,"digest":"`...)
		b = append(b, e.Digest.String()...)
		b = append(b, '"')
	}
	if e.Target != "" {
		b = appendStringField(b, "target", e.Target, false)
	}
	if e.Type == TypeChar || e.Type == TypeBlock {
		b = appendUintField(b, "major", uint64(e.Major))
		b = appendUintField(b, "minor", uint64(e.Minor))
	}
	if e.Opaque {
		b = append(b, `,"opaque":true`...)
	}
	if e.Mtime != 0 {
		b = append(b, `,"mtime":`...)
		b = strconv.AppendInt(b, e.Mtime, 10)
	}
	if len(e.Xattrs) > 0 {
		b = append(b, `,"xattrs":{`...)
		for i, x := range e.Xattrs {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, x.Name)
			b = append(b, ':', '"')
			b = base64.StdEncoding.AppendEncode(b, x.Value)
			b = append(b, '"')
		}
		b = append(b, '}')
	}
	return append(b, '}')
}

func appendUintField(b []byte, key string, v uint64) []byte {
	b = append(b, ',', '"')
	b = append(b, key...)
	b = append(b, '"', ':')
	return strconv.AppendUint(b, v, 10)
}

func appendStringField(b []byte, key, s string, first bool) []byte {
	if first {
		b = append(b, '{')
	} else {
		b = append(b, ',')
	}
	b = append(b, '"')
	b = append(b, key...)
	if !utf8.ValidString(s) {
		b = append(b, `_b64":"`...)
		b = base64.StdEncoding.AppendEncode(b, []byte(s))
		return append(b, '"')
	}
	b = append(b, '"', ':')
	return appendJSONString(b, s)
}

// appendJSONString quotes a valid UTF-8 string for JSON: only '"', '\' and
// control characters are escaped, so decoding gives back s exactly.
func appendJSONString(b []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

// wireManifest and wireEntry mirror the JSON keys for decoding.
type wireManifest struct {
	Version int         `json:"version"`
	Parents []LayerID   `json:"parents"`
	Entries []wireEntry `json:"entries"`
}

type wireEntry struct {
	Path      string    `json:"path"`
	PathB64   []byte    `json:"path_b64"`
	Type      EntryType `json:"type"`
	Mode      uint32    `json:"mode"`
	UID       uint32    `json:"uid"`
	GID       uint32    `json:"gid"`
	Size      int64     `json:"size"`
	Digest    *Digest   `json:"digest"`
	Target    string    `json:"target"`
	TargetB64 []byte    `json:"target_b64"`
	Major     uint32    `json:"major"`
	Minor     uint32    `json:"minor"`
	Opaque    bool      `json:"opaque"`
	Mtime     int64     `json:"mtime"`
	// Xattrs maps names to base64 values; the map's keys are sorted when
	// turned back into Entry.Xattrs.
	Xattrs map[string][]byte `json:"xattrs"`
}

// DecodeManifest parses and validates a manifest. It accepts only the
// canonical encoding, so that one manifest has exactly one digest: the input
// must equal the re-encoding of what it decodes to.
func DecodeManifest(data []byte) (*Manifest, error) {
	var w wireManifest
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadManifest, err)
	}
	if w.Version != ManifestVersion && w.Version != ManifestVersionXattrs {
		return nil, fmt.Errorf("%w: manifest version %d (want %d or %d)", ErrVersion, w.Version, ManifestVersion, ManifestVersionXattrs)
	}
	m := &Manifest{Version: w.Version, Parents: w.Parents, Entries: make([]Entry, len(w.Entries))}
	for i, we := range w.Entries {
		e := Entry{
			Path: we.Path, Type: we.Type, Mode: we.Mode, UID: we.UID, GID: we.GID,
			Size: we.Size, Target: we.Target, Major: we.Major, Minor: we.Minor,
			Opaque: we.Opaque, Mtime: we.Mtime,
		}
		if we.PathB64 != nil {
			e.Path = string(we.PathB64)
		}
		if we.TargetB64 != nil {
			e.Target = string(we.TargetB64)
		}
		if we.Digest != nil {
			e.Digest = *we.Digest
		}
		for name, v := range we.Xattrs {
			e.Xattrs = append(e.Xattrs, Xattr{Name: name, Value: v})
		}
		SortXattrs(e.Xattrs)
		m.Entries[i] = e
	}
	canon, err := m.Encode()
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(canon, data) {
		return nil, fmt.Errorf("%w: not in canonical form", ErrBadManifest)
	}
	return m, nil
}

// sortEntries puts m's entries in their canonical order: by path, the root
// first, so that a directory precedes what it holds.
func (m *Manifest) sortEntries() {
	slices.SortFunc(m.Entries, func(a, b Entry) int {
		switch {
		case a.Path == b.Path:
			return 0
		case pathLess(a.Path, b.Path):
			return -1
		}
		return 1
	})
}
