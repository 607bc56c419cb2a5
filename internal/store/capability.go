package store

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// File capabilities in a rootless store. An unprivileged caller cannot
// set security.capability on its files, but the root of a user namespace
// that maps 0 to the caller can: the kernel then stores the capability as
// revision 3 with that namespace's root (the caller's uid) as its rootid,
// and shows it as the plain revision 2 value in every namespace whose
// root is the caller, which is what every rootless sandbox of this caller
// is (sandbox: uid 0 mapped to the caller). The store writes them through
// a helper, this binary re-executed in such a namespace (capHelperEnv),
// and reads them back, from outside, as the revision 2 value
// (normalizeCapability), so manifests, inode names and verify are the
// same as a root store's.

// capHelperEnv marks this binary re-executed as the capability helper:
// os.Args[1] is the path and os.Args[2] the value in hex.
const capHelperEnv = "MSB_STORE_SETCAP_HELPER"

func init() {
	if os.Getenv(capHelperEnv) == "1" {
		os.Exit(capHelper(os.Args))
	}
}

// capHelper sets the capability the arguments name; it runs as root of
// the helper's user namespace.
func capHelper(args []string) int {
	if len(args) != 3 {
		fmt.Fprintln(os.Stderr, "capability helper: want PATH HEXVALUE")
		return 2
	}
	v, err := hex.DecodeString(args[2])
	if err == nil {
		err = unix.Lsetxattr(args[1], xattrCapability, v, 0)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "setxattr %s on %s in a user namespace: %v\n", xattrCapability, args[1], err)
		return 1
	}
	return 0
}

// setCapabilityRootless sets a file capability on p, which the caller
// owns, from the root of a user namespace that maps 0 to the caller.
func setCapabilityRootless(p string, value []byte) error {
	cmd := exec.Command("/proc/self/exe", p, hex.EncodeToString(value))
	cmd.Args[0] = "msb-store-setcap"
	cmd.Env = []string{capHelperEnv + "=1"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("setting %s on %s through a user namespace: %w: %s", xattrCapability, p, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// rootlessCaps reports whether this process can set file capabilities
// through the helper (a kernel with namespaced capabilities, a binary
// that can re-execute itself), found out once by trying on a temp file.
func (s *Store) rootlessCaps() bool {
	s.caps.once.Do(func() {
		f, err := os.CreateTemp(s.path("tmp"), "capcheck-*")
		if err != nil {
			s.caps.why = err
			return
		}
		f.Close()
		defer os.Remove(f.Name())
		// setcap cap_net_bind_service=+ep
		v2 := []byte{0x01, 0x00, 0x00, 0x02, 0x00, 0x04, 0x00, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
		if s.caps.why = setCapabilityRootless(f.Name(), v2); s.caps.why != nil {
			s.log.Warn("this rootless store cannot set file capabilities: they stay in the manifests only", "err", s.caps.why)
		}
	})
	return s.caps.why == nil
}

// capsState is what rootlessCaps found.
type capsState struct {
	once sync.Once
	why  error
}

// Revision 3 file capabilities (linux/capability.h): the magic word's
// revision, and the sizes of revisions 2 and 3 (3 adds the rootid).
const (
	capRevisionMask = 0xFF000000
	capRevision2    = 0x02000000
	capRevision3    = 0x03000000
	capSize2        = 20
	capSize3        = 24
)

// normalizeCapability turns a revision 3 capability whose rootid is this
// process's uid (one the capability helper, or a rootless sandbox's root,
// wrote) into the revision 2 value that namespace's root sees; anything
// else is returned as it is.
func normalizeCapability(v []byte) []byte {
	if len(v) != capSize3 {
		return v
	}
	magic := binary.LittleEndian.Uint32(v)
	if magic&capRevisionMask != capRevision3 || binary.LittleEndian.Uint32(v[capSize2:]) != uint32(os.Geteuid()) {
		return v
	}
	out := make([]byte, capSize2)
	copy(out, v[:capSize2])
	binary.LittleEndian.PutUint32(out, magic&^capRevisionMask|capRevision2)
	return out
}
