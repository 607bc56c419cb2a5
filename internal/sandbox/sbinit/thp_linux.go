package sbinit

import (
	"bytes"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// noHugePages asks the kernel not to back the supervisor's private
// anonymous mappings with transparent huge pages: its binary's BSS (33 MiB
// of the runtime's and the packages' zeroed globals) and the heap mapped
// so far. Where the kernel's THP mode is "always" (Debian's default
// kernel), khugepaged otherwise merges the few touched pages of a 2 MiB
// range into one huge page, and an idle supervisor grew by 2 MiB while it
// did nothing (TestCgroupV2's VM). The heap mapped later is covered by the
// runtime's own disablethp (RuntimeEnv), but not the structures the runtime
// makes as the heap grows (its arena index and page allocator's chunks,
// which it marks MADV_HUGEPAGE, overriding even the kernel's "madvise"
// mode): a trim, which follows such growth, calls this again. The host
// asks for it (wire.Config.NoHugePages) only where THP is "always": it
// reads /proc/self/maps, ~60 µs a call, which a sandbox's start would pay
// for nothing elsewhere. It is a hint: the supervisor is the same without
// it.
func noHugePages() {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return
	}
	for _, line := range bytes.Split(maps, []byte("\n")) {
		if start, end, ok := privateAnon(line); ok {
			unix.Syscall(unix.SYS_MADVISE, start, end-start, unix.MADV_NOHUGEPAGE)
		}
	}
}

// privateAnon parses one line of /proc/self/maps and says whether it is a
// private, writable mapping of no file (fields: range, perms, offset, dev,
// inode, then a name such as [stack] for the kernel's own).
func privateAnon(line []byte) (start, end uintptr, ok bool) {
	f := bytes.Fields(line)
	if len(f) != 5 || string(f[1]) != "rw-p" || string(f[4]) != "0" {
		return 0, 0, false
	}
	lo, hi, found := bytes.Cut(f[0], []byte("-"))
	if !found {
		return 0, 0, false
	}
	s, err1 := strconv.ParseUint(string(lo), 16, 64)
	e, err2 := strconv.ParseUint(string(hi), 16, 64)
	if err1 != nil || err2 != nil || e <= s {
		return 0, 0, false
	}
	return uintptr(s), uintptr(e), true
}
