package bench

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// CacheStat counts the regular files under some paths and their bytes
// resident in the page cache.
type CacheStat struct {
	Files    int
	Bytes    int64
	Resident int64
}

// DropCache evicts the page cache of every regular file under paths (each
// inode once, never crossing into another mount): sync_file_range writes
// the file's dirty pages back (without the disk cache flush an fsync
// costs, so a clean file costs nothing), then POSIX_FADV_DONTNEED drops
// them. Only these files lose their cache, so a cold trial of one method
// leaves the other methods and the rest of the machine warm. Pages a
// running process has mapped stay, and so do dentries and inodes (only a
// machine-wide drop_caches removes those).
func DropCache(ctx context.Context, paths []string) (CacheStat, error) {
	return walkFiles(ctx, paths, func(f *os.File, size int64, st *CacheStat) error {
		const wait = unix.SYNC_FILE_RANGE_WAIT_BEFORE | unix.SYNC_FILE_RANGE_WRITE | unix.SYNC_FILE_RANGE_WAIT_AFTER
		if err := unix.SyncFileRange(int(f.Fd()), 0, 0, wait); err != nil {
			return fmt.Errorf("sync_file_range %s: %w", f.Name(), err)
		}
		if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
			return fmt.Errorf("fadvise %s: %w", f.Name(), err)
		}
		return nil
	})
}

// Resident reports how much of the files under paths is in the page cache
// (mincore of a mapping of each file).
func Resident(ctx context.Context, paths []string) (CacheStat, error) {
	return walkFiles(ctx, paths, func(f *os.File, size int64, st *CacheStat) error {
		n, err := residentBytes(f, size)
		st.Resident += n
		return err
	})
}

func residentBytes(f *os.File, size int64) (int64, error) {
	if size == 0 {
		return 0, nil
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return 0, fmt.Errorf("mmap %s: %w", f.Name(), err)
	}
	defer unix.Munmap(m)
	page := int64(os.Getpagesize())
	vec := make([]byte, (size+page-1)/page)
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		return 0, fmt.Errorf("mincore %s: %w", f.Name(), errno)
	}
	var n int64
	for _, b := range vec {
		if b&1 != 0 {
			n += page
		}
	}
	return min(n, size), nil
}

// walkFiles opens every regular file under paths once per inode and calls
// fn on it.
func walkFiles(ctx context.Context, paths []string, fn func(f *os.File, size int64, st *CacheStat) error) (CacheStat, error) {
	var st CacheStat
	err := walkInodes(ctx, paths, func(p string, fi fs.FileInfo) error {
		if !fi.Mode().IsRegular() {
			return nil
		}
		f, err := os.OpenFile(p, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NOATIME, 0)
		if err != nil {
			f, err = os.OpenFile(p, os.O_RDONLY|unix.O_NOFOLLOW, 0)
		}
		if err != nil {
			return nil // unreadable (mode 000 in a layer): nothing of it can be cached by us either
		}
		defer f.Close()
		st.Files++
		st.Bytes += fi.Size()
		return fn(f, fi.Size(), &st)
	})
	return st, err
}

// diskBytes is the space (st_blocks) the trees under paths take, each
// inode once.
func diskBytes(paths ...string) (int64, error) {
	var total int64
	err := walkInodes(context.Background(), paths, func(_ string, fi fs.FileInfo) error {
		total += fi.Sys().(*syscall.Stat_t).Blocks * 512
		return nil
	})
	return total, err
}

// walkInodes calls fn once per inode under paths (missing paths are
// skipped), without following symlinks or crossing into another mount (a
// running container's merged dir would count its image twice). What
// vanishes or cannot be read during the walk (a sandbox's overlay work
// dir) is skipped. It stops when ctx ends.
func walkInodes(ctx context.Context, paths []string, fn func(p string, fi fs.FileInfo) error) error {
	type ino struct{ dev, ino uint64 }
	seen := map[ino]bool{}
	for _, root := range paths {
		rfi, err := os.Lstat(root)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		rdev := rfi.Sys().(*syscall.Stat_t).Dev
		err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if cerr := ctx.Err(); cerr != nil {
				return cerr
			}
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
					return nil
				}
				return err
			}
			fi, err := d.Info()
			if err != nil {
				return nil
			}
			st := fi.Sys().(*syscall.Stat_t)
			if d.IsDir() && st.Dev != rdev {
				return filepath.SkipDir
			}
			k := ino{st.Dev, st.Ino}
			if seen[k] {
				return nil
			}
			seen[k] = true
			return fn(p, fi)
		})
		if err != nil {
			return fmt.Errorf("walking %s: %w", root, err)
		}
	}
	return nil
}
