package rootfs

import (
	"context"

	"github.com/minisandbox/msb/internal/store"
)

// Host is the host's own system directories (/usr, /bin, /lib*, /etc bound
// read-only): what sandboxes run on by default.
type Host struct{}

// Root returns the host base.
func (Host) Root(context.Context, *store.Store) (Root, error) { return Root{HostBase: true}, nil }

func (Host) String() string { return "host" }
