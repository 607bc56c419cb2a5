package store

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/minisandbox/msb/internal/mount"
	"golang.org/x/sys/unix"
)

// Compression on btrfs. A btrfs directory may carry a compression property
// (the btrfs.compression xattr, which the directory's owner may set without
// privilege); what is created under it afterwards inherits it, and files'
// data is then stored compressed. A store is source text, bytecode and
// shared objects: on btrfs with zstd, the 181-instance cache of
// docs/swe-bench.md takes 2.0 GiB where it takes 3.5 GiB on ext4.

const btrfsSuperMagic = 0x9123683e

// The inode flags of FS_IOC_GETFLAGS that say how a btrfs inode compresses
// (linux/fs.h).
const (
	fsComprFlag   = 0x00000004 // FS_COMPR_FL: compress
	fsNoComprFlag = 0x00000400 // FS_NOCOMP_FL: never compress
)

// compressionXattr is the btrfs property's name as an xattr.
const compressionXattr = "btrfs.compression"

// DefaultCompression is what CompressDir asks for: zstd at btrfs's default
// level, which decompresses at several hundred MiB/s per core.
const DefaultCompression = "zstd"

// Compression says how the data written under a directory is compressed.
// Algorithm is empty when it is not.
type Compression struct {
	// Filesystem is "btrfs", or empty for filesystems that msb does not
	// know to compress.
	Filesystem string `json:"filesystem,omitempty"`
	// Algorithm is the btrfs algorithm, possibly with a level ("zstd",
	// "zstd:1", "lzo"), or "none" for a directory marked never to compress.
	Algorithm string `json:"algorithm,omitempty"`
	// From is where the setting comes from: "property" (the directory's own
	// or inherited) or "mount" (the filesystem's compress option).
	From string `json:"from,omitempty"`
}

// Compressed reports whether new data under the directory is compressed.
func (c Compression) Compressed() bool { return c.Algorithm != "" && c.Algorithm != "none" }

// DirCompression says how data written under dir is compressed.
func DirCompression(dir string) (Compression, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return Compression{}, fmt.Errorf("compression of %s: %w", dir, err)
	}
	if st.Type != btrfsSuperMagic {
		return Compression{}, nil
	}
	c := Compression{Filesystem: "btrfs"}
	v, _, err := getXattr(dir, compressionXattr)
	if err != nil {
		return Compression{}, fmt.Errorf("compression of %s: %w", dir, err)
	}
	if v = strings.TrimRight(v, "\x00"); v != "" {
		if v == "no" {
			v = "none" // btrfs takes both
		}
		c.Algorithm, c.From = v, "property"
		return c, nil
	}
	flags, err := inodeFlags(dir)
	if err != nil {
		return Compression{}, fmt.Errorf("compression of %s: %w", dir, err)
	}
	switch {
	case flags&fsNoComprFlag != 0:
		c.Algorithm, c.From = "none", "property"
		return c, nil
	case flags&fsComprFlag != 0:
		// chattr +c: the filesystem's default algorithm (zlib) unless the
		// mount names one.
		c.Algorithm, c.From = "zlib", "property"
	}
	opt, err := mountCompression(dir)
	if err != nil {
		return Compression{}, fmt.Errorf("compression of %s: %w", dir, err)
	}
	if opt != "" && opt != "no" {
		c.Algorithm, c.From = opt, "mount"
	}
	return c, nil
}

// CompressDir asks btrfs to compress, with DefaultCompression, what is
// created under dir from now on. It leaves dir as it is and returns false
// when dir is not on btrfs, or when dir or its mount already say how to
// compress (a property, chattr's c or m flag, a compress mount option):
// those are someone's choice. The caller must own dir.
func CompressDir(dir string) (bool, error) {
	c, err := DirCompression(dir)
	if err != nil || c.Filesystem != "btrfs" || c.Algorithm != "" {
		return false, err
	}
	if err := unix.Setxattr(dir, compressionXattr, []byte(DefaultCompression), 0); err != nil {
		return false, fmt.Errorf("setting %s=%s on %s: %w", compressionXattr, DefaultCompression, dir, err)
	}
	return true, nil
}

// CompressLogged is CompressDir telling log what it did: a change is
// info; a failure is a warning, as the directory still works uncompressed.
func CompressLogged(dir string, log *slog.Logger) {
	on, err := CompressDir(dir)
	switch {
	case err != nil:
		log.Warn("files stay uncompressed", "dir", dir, "err", err)
	case on:
		log.Info("on btrfs: files are stored compressed", "algorithm", DefaultCompression, "dir", dir)
	}
}

func inodeFlags(path string) (uint32, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	flags, err := unix.IoctlGetUint32(fd, unix.FS_IOC_GETFLAGS)
	if err != nil {
		return 0, fmt.Errorf("reading inode flags: %w", err)
	}
	return flags, nil
}

// mountCompression returns the value of the compress or compress-force
// option of the mount that holds path ("" when it has neither).
func mountCompression(path string) (string, error) {
	var stx unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, path, 0, unix.STATX_MNT_ID, &stx); err != nil {
		return "", err
	}
	if stx.Mask&unix.STATX_MNT_ID == 0 {
		return "", errors.New("the kernel gives no mount id (statx STATX_MNT_ID, Linux 5.8)")
	}
	opts, err := superOptions(stx.Mnt_id)
	if err != nil {
		return "", err
	}
	for _, o := range opts {
		k, v, _ := strings.Cut(o, "=")
		if k == "compress" || k == "compress-force" {
			return v, nil
		}
	}
	return "", nil
}

// superOptions returns the filesystem options of the mount with the given
// id, from /proc/self/mountinfo.
func superOptions(mntID uint64) ([]string, error) {
	ms, err := mount.ReadMountinfo("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	for _, m := range ms {
		if uint64(m.ID) == mntID {
			return m.Super, nil
		}
	}
	return nil, fmt.Errorf("mount %d is not in /proc/self/mountinfo", mntID)
}
