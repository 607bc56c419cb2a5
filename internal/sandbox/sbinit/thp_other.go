//go:build !linux

package sbinit

// noHugePages has nothing to do where the kernel has no transparent huge
// pages to advise against (see thp_linux.go).
func noHugePages() {}
