package sbinit

import (
	"os"

	"github.com/minisandbox/msb/internal/sandbox/wire"
)

// PrepareNetwork sets up, in the calling thread's network namespace, what
// init sets up in a sandbox's new one when its network is "none": the
// loopback up and ifc (nil: none) made. It returns ifc's tap device, which
// whoever holds the namespace keeps open for the device's carrier (see
// ifaceUp). The host calls it on a thread of its own in a namespace it
// makes ahead of a sandbox's create (wire.Config.NetReady).
func PrepareNetwork(ifc *wire.Iface) (*os.File, error) {
	if err := loopbackUp(); err != nil {
		return nil, err
	}
	if ifc == nil {
		return nil, nil
	}
	fd, err := makeIface(ifc)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), "tap "+ifc.Name), nil
}
