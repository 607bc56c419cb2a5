package envcache

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"

	"github.com/minisandbox/msb/internal/store"
)

// assemble builds a private tree for one task in copy mode: the layers,
// bottom first, written one over the other by the store (see
// store.ApplyLayers: real copies, not hard links, so a task may write to
// them without reaching the store). The cost is a full copy per task: use
// it only where overlayfs does not work (msb doctor).
func (c *Cache) assemble(ctx context.Context, bottomFirst []store.LayerID) (string, error) {
	var rnd [8]byte
	rand.Read(rnd[:])
	dir := c.path("tasks", hex.EncodeToString(rnd[:]))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", err
	}
	if err := c.store.ApplyLayers(ctx, dir, bottomFirst); err != nil {
		removeAll(dir)
		return "", fmt.Errorf("copy mode: %w", err)
	}
	return dir, nil
}
