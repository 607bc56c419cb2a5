package sbinit

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"github.com/minisandbox/msb/internal/sandbox/wire"
	"golang.org/x/sys/unix"
)

// ifaceQueue is the packets the sandbox's interface holds before it drops
// what is sent to it: nothing ever reads them.
const ifaceQueue = 16

// ifaceFd is init's descriptor of the sandbox's interface (see ifaceUp),
// open for the sandbox's life.
var ifaceFd = -1

// ifaceUp makes the interface ifc in the sandbox's network namespace: a tap
// device (the one kind that needs no kernel module: dummy and veth may be
// missing) with ifc's address, up. Nothing reads the device, so whatever
// the sandbox sends to it goes nowhere: a neighbour on its subnet never
// answers (a connection fails with EHOSTUNREACH after the neighbour lookup,
// as on a bridge without that host), and there is no route beyond it.
// Init keeps its descriptor (ifaceFd) open for the sandbox's life, without
// which the device would lack a carrier (not RUNNING, as some runtimes'
// "is up" checks want, and its routes linkdown); a
// supervisor exec'd in a cgo build keeps it on. The device is persistent,
// so that it stays should the descriptor go.
func ifaceUp(ifc *wire.Iface) error {
	fd, err := makeIface(ifc)
	if err != nil {
		return err
	}
	ifaceFd = fd
	return nil
}

// makeIface makes ifc in the calling thread's network namespace and
// returns its tap device's descriptor (close-on-exec).
func makeIface(ifc *wire.Iface) (int, error) {
	pfx, err := netip.ParsePrefix(ifc.Addr)
	if err != nil || !pfx.Addr().Is4() {
		return -1, fmt.Errorf("interface %s: bad IPv4 address %q", ifc.Name, ifc.Addr)
	}
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("opening /dev/net/tun for interface %s: %w", ifc.Name, err)
	}
	if err := makeTap(fd, ifc.Name); err != nil {
		unix.Close(fd)
		return -1, err
	}
	if err := configureIface(ifc.Name, pfx); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// makeTap creates the persistent tap device name attached to fd.
func makeTap(fd int, name string) error {
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		return err
	}
	ifr.SetUint16(unix.IFF_TAP | unix.IFF_NO_PI)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		return fmt.Errorf("creating tap device %s: %w", name, err)
	}
	if err := unix.IoctlSetInt(fd, unix.TUNSETPERSIST, 1); err != nil {
		return fmt.Errorf("making tap device %s persistent: %w", name, err)
	}
	return nil
}

// configureIface gives interface name the address pfx and a short queue,
// and brings it up.
func configureIface(name string, pfx netip.Prefix) error {
	s, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socket for interface %s: %w", name, err)
	}
	defer unix.Close(s)
	mask := prefixMask(pfx.Bits())
	steps := []struct {
		what string
		req  uint
		set  func(*unix.Ifreq) error
	}{
		{"address", unix.SIOCSIFADDR, func(r *unix.Ifreq) error { return r.SetInet4Addr(pfx.Addr().AsSlice()) }},
		{"netmask", unix.SIOCSIFNETMASK, func(r *unix.Ifreq) error { return r.SetInet4Addr(mask) }},
	}
	for _, st := range steps {
		ifr, err := unix.NewIfreq(name)
		if err != nil {
			return err
		}
		if err := st.set(ifr); err != nil {
			return err
		}
		if err := unix.IoctlIfreq(s, st.req, ifr); err != nil {
			return fmt.Errorf("setting the %s of interface %s: %w", st.what, name, err)
		}
	}
	if err := setQueueLen(s, name, ifaceQueue); err != nil {
		return err
	}
	return setUp(s, name)
}

// setQueueLen sets the transmit queue length of interface name, through
// netlink: its ioctl (SIOCSIFTXQLEN) wants CAP_SYS_ADMIN in the host's
// user namespace, which a rootless init lacks. s is a socket for the
// ioctl that finds the interface's index.
func setQueueLen(s int, name string, n uint32) error {
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(s, unix.SIOCGIFINDEX, ifr); err != nil {
		return fmt.Errorf("finding interface %s: %w", name, err)
	}
	nl, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("netlink socket: %w", err)
	}
	defer unix.Close(nl)
	// An RTM_NEWLINK request: header, ifinfomsg, one IFLA_TXQLEN attribute.
	const size = unix.SizeofNlMsghdr + unix.SizeofIfInfomsg + unix.SizeofRtAttr + 4
	msg := make([]byte, size)
	ne := binary.NativeEndian
	ne.PutUint32(msg[0:], size)
	ne.PutUint16(msg[4:], unix.RTM_NEWLINK)
	ne.PutUint16(msg[6:], unix.NLM_F_REQUEST|unix.NLM_F_ACK)
	ne.PutUint32(msg[8:], 1) // sequence number
	info := msg[unix.SizeofNlMsghdr:]
	info[0] = unix.AF_UNSPEC
	ne.PutUint32(info[4:], ifr.Uint32()) // ifi_index
	attr := info[unix.SizeofIfInfomsg:]
	ne.PutUint16(attr[0:], unix.SizeofRtAttr+4)
	ne.PutUint16(attr[2:], unix.IFLA_TXQLEN)
	ne.PutUint32(attr[4:], n)
	if err := unix.Sendto(nl, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("setting the queue length of interface %s: %w", name, err)
	}
	ack := make([]byte, 4096)
	got, _, err := unix.Recvfrom(nl, ack, 0)
	if err == nil && (got < unix.SizeofNlMsghdr+4 || ne.Uint16(ack[4:]) != unix.NLMSG_ERROR) {
		err = fmt.Errorf("unexpected netlink answer of %d bytes", got)
	}
	if err == nil {
		if errno := int32(ne.Uint32(ack[unix.SizeofNlMsghdr:])); errno != 0 {
			err = unix.Errno(-errno)
		}
	}
	if err != nil {
		return fmt.Errorf("setting the queue length of interface %s: %w", name, err)
	}
	return nil
}

// prefixMask is the IPv4 netmask of a prefix of bits bits.
func prefixMask(bits int) []byte {
	m := ^uint32(0) << (32 - bits) // 0 for bits 0: Go shifts out every bit
	return []byte{byte(m >> 24), byte(m >> 16), byte(m >> 8), byte(m)}
}

// setUp sets IFF_UP on interface name through socket s.
func setUp(s int, name string) error {
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(s, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("reading the flags of interface %s: %w", name, err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(s, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bringing interface %s up: %w", name, err)
	}
	return nil
}
