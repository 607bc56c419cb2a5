package store

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// Xattr is one extended attribute of an entry: a file capability
// (security.capability), a trusted.* or a user.* attribute, as an image
// layer's tar gives it (PAX SCHILY.xattr.NAME records).
type Xattr struct {
	Name  string
	Value []byte
}

// Xattr namespaces a manifest may hold. The overlay markers
// (trusted.overlay.*, user.overlay.*) are the store's own and never come
// from a manifest: an image could otherwise redirect or hide lower paths.
const (
	xattrCapability = "security.capability"
	xattrTrusted    = "trusted."
	xattrUser       = "user."
	maxXattrName    = 255       // XATTR_NAME_MAX
	maxXattrValue   = 64 * 1024 // XATTR_SIZE_MAX
)

// ValidXattrName reports whether a manifest may hold an attribute of that
// name: security.capability, trusted.* or user.*, but no overlay marker.
func ValidXattrName(name string) bool {
	if name == "" || len(name) > maxXattrName || !utf8.ValidString(name) || strings.IndexByte(name, 0) >= 0 {
		return false
	}
	switch {
	case name == xattrCapability:
		return true
	case strings.HasPrefix(name, xattrTrusted):
		rest := name[len(xattrTrusted):]
		return rest != "" && !strings.HasPrefix(rest, "overlay.")
	case strings.HasPrefix(name, xattrUser):
		rest := name[len(xattrUser):]
		return rest != "" && !strings.HasPrefix(rest, "overlay.")
	}
	return false
}

// validXattrs checks an entry's attributes: allowed names, sorted, each
// once, values within the kernel's limit, on an entry that can carry them.
func (e *Entry) validXattrs() error {
	if len(e.Xattrs) == 0 {
		return nil
	}
	if e.Type == TypeDelete {
		return errors.New("xattrs on a deletion")
	}
	for i, x := range e.Xattrs {
		if !ValidXattrName(x.Name) {
			return fmt.Errorf("xattr name %q is not security.capability, trusted.* or user.* (overlay markers excluded)", x.Name)
		}
		if len(x.Value) > maxXattrValue {
			return fmt.Errorf("xattr %s: value of %d bytes", x.Name, len(x.Value))
		}
		if i > 0 && e.Xattrs[i-1].Name >= x.Name {
			return fmt.Errorf("xattrs not sorted or repeated at %s", x.Name)
		}
	}
	return nil
}

// SortXattrs puts attributes in their canonical order, by name.
func SortXattrs(xs []Xattr) {
	slices.SortFunc(xs, func(a, b Xattr) int { return strings.Compare(a.Name, b.Name) })
}

// applicable returns the attributes of e this store can set: all of them
// as root; a rootless store user.* ones and file capabilities (through a
// user namespace: capability.go) but no trusted.* (which needs
// CAP_SYS_ADMIN in the filesystem's user namespace), and user.* only on
// files and directories, as the kernel allows. skipped counts the rest.
func (s *Store) applicable(e *Entry) (xs []Xattr, skipped int) {
	for _, x := range e.Xattrs {
		user := strings.HasPrefix(x.Name, xattrUser)
		switch {
		case user && e.Type != TypeFile && e.Type != TypeDir:
			skipped++
		case s.rootless && x.Name == xattrCapability && e.Type == TypeFile && s.rootlessCaps():
			xs = append(xs, x)
		case s.rootless && !user:
			skipped++
		default:
			xs = append(xs, x)
		}
	}
	return xs, skipped
}

// encodeXattrs is the binary form an inode key carries: for each
// attribute in order, uvarint lengths then the name and value bytes.
func encodeXattrs(xs []Xattr) string {
	if len(xs) == 0 {
		return ""
	}
	var b []byte
	for _, x := range xs {
		b = binary.AppendUvarint(b, uint64(len(x.Name)))
		b = append(b, x.Name...)
		b = binary.AppendUvarint(b, uint64(len(x.Value)))
		b = append(b, x.Value...)
	}
	return string(b)
}

// decodeXattrs reverses encodeXattrs.
func decodeXattrs(s string) ([]Xattr, error) {
	var xs []Xattr
	b := []byte(s)
	next := func() ([]byte, error) {
		n, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < n {
			return nil, errors.New("malformed xattr encoding")
		}
		v := b[k : k+int(n)]
		b = b[k+int(n):]
		return v, nil
	}
	for len(b) > 0 {
		name, err := next()
		if err != nil {
			return nil, err
		}
		value, err := next()
		if err != nil {
			return nil, err
		}
		xs = append(xs, Xattr{Name: string(name), Value: value})
	}
	return xs, nil
}

// xattrHash names a set of attributes in an inode's file name: the first
// 128 bits of the SHA-256 of their encoding, in hex.
func xattrHash(enc string) string {
	if enc == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(enc))
	return hex.EncodeToString(sum[:16])
}

// setXattrs sets attributes on a path (not following a symlink); a
// rootless store's file capabilities through a user namespace. A file's
// are set last, after chown and chmod, which would clear a capability.
func (s *Store) setXattrs(p string, xs []Xattr) error {
	for _, x := range xs {
		if s.rootless && x.Name == xattrCapability {
			if err := setCapabilityRootless(p, x.Value); err != nil {
				return err
			}
			continue
		}
		if err := unix.Lsetxattr(p, x.Name, x.Value, 0); err != nil {
			return fmt.Errorf("setxattr %s on %s: %w", x.Name, p, err)
		}
	}
	return nil
}

// readXattrs returns the attributes of a path that a manifest may hold,
// sorted by name.
func readXattrs(p string) ([]Xattr, error) {
	sz, err := unix.Llistxattr(p, nil)
	if errors.Is(err, unix.ENOTSUP) {
		return nil, nil // a filesystem without xattrs holds none
	}
	if err != nil || sz == 0 {
		return nil, err
	}
	buf := make([]byte, sz)
	sz, err = unix.Llistxattr(p, buf)
	if err != nil {
		return nil, err
	}
	var xs []Xattr
	for name := range strings.SplitSeq(strings.TrimRight(string(buf[:sz]), "\x00"), "\x00") {
		if !ValidXattrName(name) {
			continue
		}
		n, err := unix.Lgetxattr(p, name, nil)
		if err != nil {
			return nil, fmt.Errorf("getxattr %s on %s: %w", name, p, err)
		}
		v := make([]byte, n)
		if n, err = unix.Lgetxattr(p, name, v); err != nil {
			return nil, fmt.Errorf("getxattr %s on %s: %w", name, p, err)
		}
		v = v[:n]
		if name == xattrCapability {
			v = normalizeCapability(v)
		}
		xs = append(xs, Xattr{Name: name, Value: v})
	}
	SortXattrs(xs)
	return xs, nil
}
