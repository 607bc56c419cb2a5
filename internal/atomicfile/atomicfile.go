// Package atomicfile replaces a file whole. A write goes to a temp file
// (a name of its own, so two writers of one file never share it), is
// synced, takes the file's name by rename, and the directory is synced so
// the rename lasts. A crash at any point leaves the old file or the new
// one, never a mix; what it may leave besides is a temp file, which is
// never the file (callers that scan a directory skip or remove temps by
// their prefix, Options.TempPattern).
//
// With Options.NoSync the two syncs are skipped: readers still see the
// old or the new file whole, but after a crash of the machine the new
// file may be empty. That is for content a cache can make again.
package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Options says how a file is written. The zero value writes mode 0o644
// through a temp file beside the file, synced.
type Options struct {
	// Perm is the file's mode; 0o644 when zero.
	Perm fs.FileMode
	// DirPerm, when not zero, makes the file's directory (and its
	// parents) with this mode first.
	DirPerm fs.FileMode
	// TempDir holds the temp file: the file's directory when empty. It
	// must be on the file's filesystem (rename does not cross them).
	TempDir string
	// TempPattern names the temp file as os.CreateTemp does (the last
	// "*" becomes random digits): "."+base+".*.tmp" when empty.
	TempPattern string
	// NoSync skips syncing the file and the directory (see the package
	// comment).
	NoSync bool
}

// Write replaces path with data.
func Write(path string, data []byte, o Options) error {
	return WriteFrom(path, o, func(f *os.File) error {
		_, err := f.Write(data)
		return err
	})
}

// WriteFrom replaces path with what fill writes to the temp file f (to f
// itself, or to f.Name() by another handle). When fill fails, nothing is
// renamed and the temp file is removed; fill's error comes back unwrapped,
// so a caller can tell its own errors apart with errors.Is and errors.As.
func WriteFrom(path string, o Options, fill func(f *os.File) error) error {
	dir := filepath.Dir(path)
	if o.DirPerm != 0 {
		if err := os.MkdirAll(dir, o.DirPerm); err != nil {
			return fmt.Errorf("making the directory of %s: %w", path, err)
		}
	}
	f, err := os.CreateTemp(o.tempDir(dir), o.tempPattern(path))
	if err != nil {
		return fmt.Errorf("making a temp file to write %s: %w", path, err)
	}
	tmp := f.Name()
	if err := fill(f); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := finish(f, o); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing %s (temp file %s): %w", path, tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if o.NoSync {
		return nil
	}
	return SyncDir(dir)
}

// finish gives the temp file its mode, syncs and closes it.
func finish(f *os.File, o Options) error {
	perm := o.Perm
	if perm == 0 {
		perm = 0o644
	}
	err := f.Chmod(perm)
	if err == nil && !o.NoSync {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}

func (o Options) tempDir(dir string) string {
	if o.TempDir != "" {
		return o.TempDir
	}
	return dir
}

func (o Options) tempPattern(path string) string {
	if o.TempPattern != "" {
		return o.TempPattern
	}
	return "." + filepath.Base(path) + ".*.tmp"
}

// SyncDir syncs a directory, so that the names made, renamed or removed
// in it last through a crash. A directory that is gone has nothing to
// sync and is no error.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("opening %s to sync it: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("syncing %s: %w", dir, err)
	}
	return nil
}
