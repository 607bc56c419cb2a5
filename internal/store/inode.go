package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// inodeKey is what a shared inode stands for: content plus the metadata that
// hard links share. Its file name is <hex>-<mode octal>-<uid>-<gid>, with
// -<mtime ns> appended when the layer records times and -x<xattr hash>
// when the inode has extended attributes.
type inodeKey struct {
	digest   Digest
	mode     uint32
	uid, gid uint32
	mtime    int64
	// xhash names the extended attributes (xattrHash of xattrs); xattrs is
	// their encoding (encodeXattrs), which a key parsed from a file name
	// lacks.
	xhash  string
	xattrs string
}

func (k inodeKey) name() string {
	n := fmt.Sprintf("%s-%04o-%d-%d", k.digest.Hex(), k.mode, k.uid, k.gid)
	if k.mtime != 0 {
		n += "-" + strconv.FormatInt(k.mtime, 10)
	}
	if k.xhash != "" {
		n += "-x" + k.xhash
	}
	return n
}

func parseInodeName(name string) (inodeKey, error) {
	var k inodeKey
	parts := strings.Split(name, "-")
	if last := parts[len(parts)-1]; len(parts) > 4 && strings.HasPrefix(last, "x") {
		k.xhash = last[1:]
		parts = parts[:len(parts)-1]
		if len(k.xhash) != 32 || strings.Trim(k.xhash, "0123456789abcdef") != "" {
			return k, fmt.Errorf("inode name %q: bad xattr hash", name)
		}
	}
	if len(parts) != 4 && len(parts) != 5 {
		return k, fmt.Errorf("inode name %q: want 4 to 6 fields", name)
	}
	d, err := parseHexDigest(parts[0])
	if err != nil {
		return k, err
	}
	mode, err1 := strconv.ParseUint(parts[1], 8, 32)
	uid, err2 := strconv.ParseUint(parts[2], 10, 32)
	gid, err3 := strconv.ParseUint(parts[3], 10, 32)
	if err := errors.Join(err1, err2, err3); err != nil || mode&^0o7777 != 0 {
		return k, fmt.Errorf("inode name %q: bad mode, uid or gid", name)
	}
	k = inodeKey{digest: d, mode: uint32(mode), uid: uint32(uid), gid: uint32(gid), xhash: k.xhash}
	if len(parts) == 5 {
		if k.mtime, err = strconv.ParseInt(parts[4], 10, 64); err != nil || k.mtime <= 0 {
			return k, fmt.Errorf("inode name %q: bad mtime", name)
		}
	}
	if k.name() != name {
		return k, fmt.Errorf("inode name %q is not canonical", name)
	}
	return k, nil
}

func (s *Store) inodePath(k inodeKey) string {
	h := k.digest.Hex()
	return filepath.Join(s.root, "inodes", h[:2], k.name())
}

// keyOf returns the inode a file entry is materialized as. A rootless store
// owns everything as the caller, so the caller's ids key the inode, and
// only the extended attributes it can set (applicable) are part of it.
func (s *Store) keyOf(e *Entry) inodeKey {
	k := inodeKey{digest: e.Digest, mode: e.Mode, uid: e.UID, gid: e.GID, mtime: e.Mtime}
	if s.rootless {
		k.uid, k.gid = s.uid, s.gid
	}
	if len(e.Xattrs) > 0 {
		xs, _ := s.applicable(e)
		k.xattrs = encodeXattrs(xs)
		k.xhash = xattrHash(k.xattrs)
	}
	return k
}

// withoutXattrs is k for the same content and metadata but no extended
// attributes: what an object may double as.
func (k inodeKey) withoutXattrs() inodeKey {
	k.xhash, k.xattrs = "", ""
	return k
}

// xattrsMatch reports whether the file at p has exactly k's extended
// attributes (among those a manifest may hold).
func xattrsMatch(p string, k inodeKey) (bool, error) {
	xs, err := readXattrs(p)
	if err != nil {
		return false, err
	}
	return xattrHash(encodeXattrs(xs)) == k.xhash, nil
}

// metaMatches reports whether a stat result has exactly key's metadata
// (extended attributes aside: see xattrsMatch).
func metaMatches(st *unix.Stat_t, k inodeKey) bool {
	return st.Mode&0o7777 == k.mode && st.Uid == k.uid && st.Gid == k.gid &&
		(k.mtime == 0 || st.Mtim.Nano() == k.mtime)
}

// ensureInode makes inodes/xx/<key> exist. It links the object when the
// object already has the key's metadata (usually: objects are written with
// the metadata of the first inode that needs them), and otherwise writes a
// fsynced copy re-verified against the digest. Published files are never
// modified, so concurrent callers cannot disturb each other.
func (s *Store) ensureInode(ctx context.Context, k inodeKey) error {
	ip := s.inodePath(k)
	if _, err := os.Lstat(ip); err == nil {
		return nil
	}
	op := s.objectPath(k.digest)
	var st unix.Stat_t
	err := unix.Lstat(op, &st)
	if errors.Is(err, unix.ENOENT) {
		// A cold object: raw again first (Materialize thaws a layer's
		// objects together before this; a commit over a cold layer's
		// content may come here).
		if err := s.thawOne(ctx, k.digest); err != nil {
			return err
		}
		err = unix.Lstat(op, &st)
	}
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("object %s: %w", k.digest, ErrNotFound)
		}
		return fmt.Errorf("stat object %s: %w", k.digest, err)
	}
	if k.xhash == "" && metaMatches(&st, k) {
		if err := linkIfAbsent(op, ip); err != nil {
			return fmt.Errorf("linking inode %s: %w", k.name(), err)
		}
		return nil
	}
	src, err := os.Open(op)
	if err != nil {
		return fmt.Errorf("opening object %s: %w", k.digest, err)
	}
	defer src.Close()
	p, err := s.writeTemp(ctx, src, st.Size, k.digest, &k, true)
	if err != nil {
		return fmt.Errorf("copying object into inode %s: %w", k.name(), err)
	}
	defer os.Remove(p.tmp)
	if err := linkIfAbsent(p.tmp, ip); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("publishing inode %s: %w", k.name(), err)
	}
	return nil
}
