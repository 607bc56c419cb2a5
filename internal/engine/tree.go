package engine

import (
	"github.com/minisandbox/msb/internal/sandbox/sbinit"
	"github.com/minisandbox/msb/internal/store"
)

// A binary that holds an engine takes snapshots, and the snapshot of a
// rootless sandbox whose user is not root reads the sandbox's writable
// layer in this binary's tree stage (sandbox.Sandbox.OpenWritable), which
// writes it as a store tree stream. The lean msb, which holds no engine,
// leaves the store out (sbinit.WriteTree).
func init() { sbinit.WriteTree = store.WriteTree }
