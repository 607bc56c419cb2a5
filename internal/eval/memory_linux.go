package eval

import (
	"github.com/minisandbox/msb/internal/cgroup"
	"github.com/minisandbox/msb/internal/sandbox"
)

// memoryWorkers is how many evaluation sandboxes fit in the memory available
// now, each allowed perSandbox bytes (0: the sandbox default), at least 1.
func memoryWorkers(perSandbox int64) int {
	if perSandbox <= 0 {
		perSandbox = sandbox.DefaultLimits.MemoryBytes
	}
	avail := cgroup.MemAvailable()
	if avail < 0 {
		return 1 << 20 // unknown: the workers flag alone decides
	}
	return max(1, int(avail/perSandbox))
}
