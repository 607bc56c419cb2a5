package checkpoint

import (
	"encoding/binary"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// routeMsg is an RTM_NEWROUTE message with rtm_flags flags and one
// attribute of 4 bytes, as "ip route save" writes it.
func routeMsg(flags uint32) []byte {
	b := make([]byte, unix.SizeofNlMsghdr+unix.SizeofRtMsg+8)
	binary.NativeEndian.PutUint32(b, uint32(len(b)))
	binary.NativeEndian.PutUint16(b[4:], unix.RTM_NEWROUTE)
	binary.NativeEndian.PutUint32(b[unix.SizeofNlMsghdr+8:], flags)
	binary.NativeEndian.PutUint16(b[unix.SizeofNlMsghdr+unix.SizeofRtMsg:], 8)
	binary.NativeEndian.PutUint16(b[unix.SizeofNlMsghdr+unix.SizeofRtMsg+2:], unix.RTA_OIF)
	binary.NativeEndian.PutUint32(b[unix.SizeofNlMsghdr+unix.SizeofRtMsg+4:], 2)
	return b
}

func TestClearRouteStateIn(t *testing.T) {
	magic := binary.NativeEndian.AppendUint32(nil, routeDumpMagic)
	other := uint32(unix.RTM_F_NOTIFY) // not a nexthop's state: kept
	dump := slices.Concat(magic, routeMsg(unix.RTNH_F_LINKDOWN|other), routeMsg(0), routeMsg(unix.RTNH_F_DEAD))
	want := slices.Concat(magic, routeMsg(other), routeMsg(0), routeMsg(0))
	if changed, err := clearRouteStateIn(dump); err != nil || !changed || !slices.Equal(dump, want) {
		t.Errorf("clearing linkdown and dead: changed %v, %v, routes equal to the want: %v", changed, err, slices.Equal(dump, want))
	}
	if changed, err := clearRouteStateIn(dump); err != nil || changed {
		t.Errorf("clearing again: changed %v, %v; want unchanged", changed, err)
	}
	if changed, err := clearRouteStateIn(slices.Clone(magic)); err != nil || changed {
		t.Errorf("no routes: changed %v, %v", changed, err)
	}
	for name, bad := range map[string][]byte{
		"no magic":      routeMsg(unix.RTNH_F_LINKDOWN),
		"cut short":     slices.Concat(magic, routeMsg(0)[:20]),
		"a long length": slices.Concat(magic, binary.NativeEndian.AppendUint32(nil, 1000), make([]byte, 12)),
	} {
		if _, err := clearRouteStateIn(bad); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
