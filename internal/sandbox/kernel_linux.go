package sandbox

import (
	"fmt"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// kernel is this host's kernel release (uname -r) and its major and
// minor version, read once.
var kernel = sync.OnceValues(func() (string, [2]int) {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "unknown", [2]int{}
	}
	rel := unix.ByteSliceToString(u.Release[:])
	return rel, parseKernelVersion(rel)
})

// parseKernelVersion is the major and minor version of a kernel release
// such as "6.18.44-fc-v1147"; zeros where it does not parse.
func parseKernelVersion(rel string) [2]int {
	var v [2]int
	parts := strings.SplitN(rel, ".", 3)
	for i := 0; i < 2 && i < len(parts); i++ {
		digits := parts[i]
		if end := strings.IndexFunc(digits, func(r rune) bool { return r < '0' || r > '9' }); end >= 0 {
			digits = digits[:end]
		}
		v[i], _ = strconv.Atoi(digits)
	}
	return v
}

// RootlessResetKernel says whether this kernel can reset a rootless
// sandbox in place, and if not, why: the reset's new overlay takes its
// upper dir from a detached mount, which kernels before 6.15 refuse
// ("failed to clone upperpath").
func RootlessResetKernel() error { return rootlessResetKernel(kernel()) }

// rootlessResetKernel is RootlessResetKernel for kernel release rel of
// version v (major, minor).
func rootlessResetKernel(rel string, v [2]int) error {
	if v[0] > 6 || v[0] == 6 && v[1] >= 15 {
		return nil
	}
	return fmt.Errorf("a rootless reset's new root overlay takes its upper dir from a detached mount, which kernels before 6.15 refuse (\"failed to clone upperpath\"); this one is %s", rel)
}
