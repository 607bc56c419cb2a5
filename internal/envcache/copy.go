package envcache

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/minisandbox/msb/internal/store"
	"golang.org/x/sys/unix"
)

// assemble builds a private tree for one task in copy mode: the layers,
// bottom first, applied one after the other from their manifests (deletions
// remove, opaque directories are emptied first, files are copied with
// copy_file_range, which clones on filesystems that support it). Files are
// real copies, not hard links, so a task may write to them without reaching
// the store. The cost is a full copy per task: use it only where overlayfs
// does not work (msb doctor).
func (c *Cache) assemble(ctx context.Context, bottomFirst []store.LayerID) (string, error) {
	var rnd [8]byte
	rand.Read(rnd[:])
	dir := c.path("tasks", hex.EncodeToString(rnd[:]))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", err
	}
	for _, id := range bottomFirst {
		if err := c.applyLayer(ctx, dir, id); err != nil {
			removeAll(dir)
			return "", fmt.Errorf("copy mode: applying layer %s: %w", id.Short(), err)
		}
	}
	return dir, nil
}

func (c *Cache) applyLayer(ctx context.Context, dst string, id store.LayerID) error {
	m, err := c.store.Manifest(id)
	if err != nil {
		return err
	}
	tree := c.store.TreePath(id)
	var dirs []store.Entry
	var budget int64
	defer func() {
		if budget > 0 {
			c.opts.Budget.Release(budget)
		}
	}()
	for _, e := range m.Entries {
		if err := ctx.Err(); err != nil {
			return err
		}
		p := filepath.Join(dst, filepath.FromSlash(e.Path))
		switch e.Type {
		case store.TypeDelete:
			if err := removeAll(p); err != nil {
				return err
			}
		case store.TypeDir:
			if fi, err := os.Lstat(p); err == nil && !fi.IsDir() {
				os.Remove(p)
			} else if err == nil && e.Opaque {
				ents, _ := os.ReadDir(p)
				for _, x := range ents {
					removeAll(filepath.Join(p, x.Name()))
				}
			}
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
			dirs = append(dirs, e)
		case store.TypeSymlink:
			removeAll(p)
			if err := os.Symlink(e.Target, p); err != nil {
				return err
			}
		case store.TypeFile:
			if b := c.opts.Budget; b != nil {
				if err := b.Acquire(ctx, e.Size); err != nil {
					return err
				}
				budget = e.Size
			}
			removeAll(p)
			err := copyFile(filepath.Join(tree, filepath.FromSlash(e.Path)), p, e.Mode)
			if budget > 0 {
				c.opts.Budget.Release(budget)
				budget = 0
			}
			if err != nil {
				return err
			}
		default:
			// devices and fifos: recreate when allowed; skip otherwise
			removeAll(p)
			mode := uint32(unix.S_IFIFO)
			switch e.Type {
			case store.TypeChar:
				mode = unix.S_IFCHR
			case store.TypeBlock:
				mode = unix.S_IFBLK
			}
			unix.Mknod(p, mode|e.Mode&0o7777, int(unix.Mkdev(e.Major, e.Minor)))
		}
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		os.Chmod(filepath.Join(dst, filepath.FromSlash(dirs[i].Path)), os.FileMode(dirs[i].Mode&0o777)|modeExtra(dirs[i].Mode))
	}
	return nil
}

func modeExtra(m uint32) os.FileMode {
	var out os.FileMode
	if m&unix.S_ISUID != 0 {
		out |= os.ModeSetuid
	}
	if m&unix.S_ISGID != 0 {
		out |= os.ModeSetgid
	}
	if m&unix.S_ISVTX != 0 {
		out |= os.ModeSticky
	}
	return out
}

func copyFile(src, dst string, mode uint32) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil { // copy_file_range where the kernel can
		out.Close()
		return err
	}
	if err := out.Chmod(os.FileMode(mode&0o777) | modeExtra(mode)); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	// keep the time, so git's index still matches the tree
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	return os.Chtimes(dst, fi.ModTime(), fi.ModTime())
}
