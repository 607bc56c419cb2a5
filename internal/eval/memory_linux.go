package eval

import (
	"os"
	"strconv"
	"strings"

	"github.com/minisandbox/msb/internal/sandbox"
)

// memoryWorkers is how many evaluation sandboxes fit in the memory available
// now, each allowed perSandbox bytes (0: the sandbox default), at least 1.
func memoryWorkers(perSandbox int64) int {
	if perSandbox <= 0 {
		perSandbox = sandbox.DefaultLimits.MemoryBytes
	}
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 1 << 20
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemAvailable:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			if n := int((kb << 10) / perSandbox); n > 0 {
				return n
			}
			return 1
		}
	}
	return 1 << 20
}
