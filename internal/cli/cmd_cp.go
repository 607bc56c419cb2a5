package cli

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/client"
)

func newCpCmd(g *globals) *cobra.Command {
	var d daemonFlags
	cmd := &cobra.Command{
		Use:   "cp SRC DST",
		Short: "Copy a file or directory between this host and a sandbox of the daemon (ID:/path names the sandbox side)",
		Example: `  msb cp ./fix.py 3f2a9c0d1e2b4f56:/testbed/calc/fix.py
  msb cp ./tools 3f2a9c0d1e2b4f56:/root/tools
  msb cp 3f2a9c0d1e2b4f56:/testbed/calc ./calc-copy`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := d.client(g)
			if err != nil {
				return err
			}
			srcID, src, srcRemote := remotePath(args[0])
			dstID, dst, dstRemote := remotePath(args[1])
			var n int64
			switch {
			case srcRemote == dstRemote:
				return fmt.Errorf("%w: exactly one of SRC and DST must be ID:/path (a sandbox)", errUsage)
			case dstRemote:
				n, err = upload(cmd.Context(), c, src, dstID, dst)
			default:
				n, err = download(cmd.Context(), c, srcID, src, dst)
			}
			if err != nil {
				return err
			}
			return printOr(g, api.FileWritten{Path: args[1], Bytes: n}, "")
		},
	}
	d.register(cmd.Flags())
	return cmd
}

// remotePath splits ID:/path; a local path has no colon before its first
// slash.
func remotePath(s string) (id, p string, remote bool) {
	i := strings.Index(s, ":")
	if i <= 0 || strings.Contains(s[:i], "/") {
		return "", s, false
	}
	return s[:i], s[i+1:], true
}

func upload(ctx context.Context, c *client.Client, src, id, dst string) (int64, error) {
	fi, err := os.Stat(src)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", errNoInput, err)
	}
	if !fi.IsDir() {
		b, err := os.ReadFile(src)
		if err != nil {
			return 0, err
		}
		return int64(len(b)), c.WriteFile(ctx, id, dst, b, uint32(fi.Mode().Perm()))
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.AddFS(os.DirFS(src)); err != nil {
		return 0, fmt.Errorf("packing %s: %w", src, err)
	}
	if err := tw.Close(); err != nil {
		return 0, err
	}
	return int64(buf.Len()), c.PutTar(ctx, id, dst, buf.Bytes())
}

func download(ctx context.Context, c *client.Client, id, src, dst string) (int64, error) {
	fe, err := c.Stat(ctx, id, src)
	if err != nil {
		return 0, err
	}
	if fe.Type != "dir" {
		b, err := c.ReadFile(ctx, id, src)
		if err != nil {
			return 0, err
		}
		return int64(len(b)), os.WriteFile(dst, b, fs.FileMode(fe.Mode&0o777))
	}
	tb, err := c.GetTar(ctx, id, src)
	if err != nil {
		return 0, err
	}
	return int64(len(tb)), untar(tb, dst, path.Base(path.Clean(src)))
}

// untar unpacks a directory's tar (entries under top/) into dst, refusing
// entries that would land outside it.
func untar(tb []byte, dst, top string) error {
	tr := tar.NewReader(bytes.NewReader(tb))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		name := filepath.Clean(h.Name)
		if rest, ok := strings.CutPrefix(name, top); ok && (rest == "" || strings.HasPrefix(rest, "/")) {
			name = strings.TrimPrefix(rest, "/")
		}
		if !filepath.IsLocal(name) && name != "" {
			return fmt.Errorf("refusing %q: it leaves %s", h.Name, dst)
		}
		p := filepath.Join(dst, name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, fs.FileMode(h.Mode&0o777))
			if err != nil {
				return err
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		case tar.TypeSymlink:
			os.Remove(p)
			if err := os.Symlink(h.Linkname, p); err != nil {
				return err
			}
		}
	}
}
