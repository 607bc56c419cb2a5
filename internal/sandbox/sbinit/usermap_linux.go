package sbinit

import (
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// In a rootless sandbox whose user is not root, init starts in a new user
// namespace without maps (EnvAwaitMap=wait) and waits until the host has
// had newuidmap and newgidmap write them, a byte on MapFd saying so. It
// then executes itself again (EnvAwaitMap=mapped): only an exec after the
// maps exist gives it the namespace's capabilities.
const (
	EnvAwaitMap = "MSB_SANDBOX_AWAIT_MAP"
	// MapFd is the pipe's descriptor, after the control socket (a rootless
	// sandbox has no idmap namespace, wire.IdmapFd).
	MapFd = 4
)

// awaitMap is the start of init described at EnvAwaitMap: it returns at
// once for every other init; a waiting one it executes again, and a mapped
// one gets back the parent-death signal that exec cleared.
func awaitMap() error {
	switch os.Getenv(EnvAwaitMap) {
	case "wait":
		return reexecMapped()
	case "mapped":
		return setParentDeathSignal()
	}
	return nil
}

// reexecMapped waits for the host's byte on MapFd, then executes init
// again with EnvAwaitMap=mapped. Without the byte the host gave up, and
// its error says why: init exits without a word on the control socket,
// where one would stand in for the host's.
func reexecMapped() error {
	f := os.NewFile(MapFd, "user map")
	var b [1]byte
	if _, err := io.ReadFull(f, b[:]); err != nil {
		fmt.Fprintf(os.Stderr, "msb sandbox init: no user namespace maps from the host: %v\n", err)
		os.Exit(125)
	}
	f.Close()
	env := []string{EnvAwaitMap + "=mapped"}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, EnvAwaitMap+"=") {
			env = append(env, kv)
		}
	}
	return unix.Exec("/proc/self/exe", os.Args, env)
}
