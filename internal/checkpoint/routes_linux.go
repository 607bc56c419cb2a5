package checkpoint

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// routeDumpMagic opens the output of "ip route save", which CRIU keeps as
// route-N.img and route6-N.img: netlink RTM_NEWROUTE messages follow.
const routeDumpMagic = 0x45311224

// routeStateFlags are the route flags that tell a nexthop's state, not
// the route: a route over a device without carrier (the sandbox's tap
// whose descriptor init was not holding) is dumped with RTNH_F_LINKDOWN,
// and "ip route restore" fails on it ("Invalid rtm_flags - can not contain
// DEAD or LINKDOWN"), failing the whole restore. The kernel sets them
// again from the restored device.
const routeStateFlags = unix.RTNH_F_DEAD | unix.RTNH_F_LINKDOWN

// clearRouteState clears routeStateFlags in the routes of every network
// namespace of the dump in dir, so that they can be added again.
func clearRouteState(dir string) error {
	for _, pattern := range []string{"route-*.img", "route6-*.img"} {
		paths, err := filepath.Glob(filepath.Join(dir, pattern))
		if err != nil {
			return err
		}
		for _, p := range paths {
			if err := clearRouteStateFile(p); err != nil {
				return err
			}
		}
	}
	return nil
}

func clearRouteStateFile(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	changed, err := clearRouteStateIn(b)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if !changed {
		return nil
	}
	return os.WriteFile(path, b, 0o600)
}

// clearRouteStateIn clears routeStateFlags in the rtm_flags of each route
// of b, an "ip route save" output, in place; it says whether it changed b.
func clearRouteStateIn(b []byte) (bool, error) {
	if len(b) == 0 {
		return false, nil
	}
	if len(b) < 4 || binary.NativeEndian.Uint32(b) != routeDumpMagic {
		return false, fmt.Errorf("not a saved route dump")
	}
	changed := false
	for off := 4; off < len(b); {
		if len(b)-off < unix.SizeofNlMsghdr {
			return false, fmt.Errorf("a route message cut short at byte %d", off)
		}
		n := int(binary.NativeEndian.Uint32(b[off:]))
		if n < unix.SizeofNlMsghdr || n > len(b)-off {
			return false, fmt.Errorf("a route message of %d bytes at byte %d of %d", n, off, len(b))
		}
		typ := binary.NativeEndian.Uint16(b[off+4:])
		if typ == unix.RTM_NEWROUTE && n >= unix.SizeofNlMsghdr+unix.SizeofRtMsg {
			at := off + unix.SizeofNlMsghdr + 8 // rtmsg's flags follow its 8 one-byte fields
			flags := binary.NativeEndian.Uint32(b[at:])
			if flags&routeStateFlags != 0 {
				binary.NativeEndian.PutUint32(b[at:], flags&^routeStateFlags)
				changed = true
			}
		}
		off += (n + unix.NLMSG_ALIGNTO - 1) &^ (unix.NLMSG_ALIGNTO - 1)
	}
	return changed, nil
}
