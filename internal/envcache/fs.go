package envcache

import (
	"github.com/minisandbox/msb/internal/atomicfile"
	"github.com/minisandbox/msb/internal/sandbox"
)

// removeAll is os.RemoveAll that first makes directories writable and
// searchable, as overlay work dirs (mode 000) and read-only build trees
// need, even for an unprivileged owner.
func removeAll(p string) error { return sandbox.RemoveAll(p) }

// cacheWrite is how the cache writes a file whole (atomicfile.Options):
// readers see all or nothing; unsynced, as a file lost to a crash of the
// machine is fetched or built again.
var cacheWrite = atomicfile.Options{NoSync: true}

// writeAtomic writes a small file whole.
func writeAtomic(p string, b []byte) error { return atomicfile.Write(p, b, cacheWrite) }
