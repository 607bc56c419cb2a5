package envcache

import (
	"os"

	"github.com/minisandbox/msb/internal/sandbox"
)

// removeAll is os.RemoveAll that first makes directories writable and
// searchable, as overlay work dirs (mode 000) and read-only build trees
// need, even for an unprivileged owner.
func removeAll(p string) error { return sandbox.RemoveAll(p) }

// writeAtomic writes a small file by rename, so readers see all or nothing.
func writeAtomic(p string, b []byte) error {
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}
