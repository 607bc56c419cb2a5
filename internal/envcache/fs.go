package envcache

import (
	"io/fs"
	"os"
	"path/filepath"
)

// removeAll is os.RemoveAll that first makes directories writable and
// searchable, as overlay work dirs (mode 000) and read-only build trees
// need, even for an unprivileged owner.
func removeAll(p string) error {
	if _, err := os.Lstat(p); err != nil {
		return nil
	}
	if err := os.RemoveAll(p); err == nil {
		return nil
	}
	filepath.WalkDir(p, func(q string, d fs.DirEntry, err error) error {
		if d != nil && d.IsDir() {
			os.Chmod(q, 0o700)
		}
		return nil
	})
	return os.RemoveAll(p)
}

// writeAtomic writes a small file by rename, so readers see all or nothing.
func writeAtomic(p string, b []byte) error {
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}
