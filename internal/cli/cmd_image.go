//go:build !msblean

package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/engine"
	"github.com/minisandbox/msb/internal/rootfs"
)

type importImageFlags struct {
	username      string
	authFile      string
	passwordStdin bool
	insecure      bool
	names         []string
}

func newCacheImportImageCmd(g *globals) *cobra.Command {
	var f importImageFlags
	cmd := &cobra.Command{
		Use:   "import-image SOURCE",
		Short: "Import an OCI or Docker image as layers of the cache (refs image/<reference> and image/sha256:<digest>)",
		Long: `Import an OCI or Docker image as layers of the cache.

SOURCE is one of:
  oci:DIR[:NAME]              an OCI image layout directory (NAME: its ref.name annotation)
  oci-archive:FILE[:NAME]     a tar of one (podman save --format oci-archive, skopeo)
  docker-archive:FILE[:REF]   docker save / podman save
  docker://REF                a registry speaking the distribution API v2
  containers-storage:REF      podman's local store (through podman save)
  docker-daemon:REF           docker's local store (through docker save)
  a bare path                 a directory is an OCI layout, a file an archive of either kind

Each layer becomes a store layer, its files deduplicated against the whole
cache; the image's Env, WorkingDir and User are kept. Run on it with
msb run --image REF, or build environments on it with --base image/REF.`,
		Example: `  msb cache import-image docker-archive:debian.tar
  msb cache import-image --insecure docker://127.0.0.1:5000/swe/task:1
  echo "$TOKEN" | msb cache import-image --username me --password-stdin docker://ghcr.io/org/img:tag
  msb cache import-image --authfile ~/auth.json docker://registry.example.com/org/img:tag
  msb run --image docker.io/library/debian:bookworm -- cat /etc/os-release`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runImportImage(cmd.Context(), g, &f, args[0])
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.username, "username", "", "registry user name (default: the docker/podman config's credentials)")
	fs.BoolVar(&f.passwordStdin, "password-stdin", false, "read the registry password from stdin")
	fs.StringVar(&f.authFile, "authfile", "", "podman/docker auth file read before ~/.docker/config.json and podman's auth.json (default $REGISTRY_AUTH_FILE)")
	fs.BoolVar(&f.insecure, "insecure", false, "allow plain HTTP to a registry on a loopback address")
	fs.StringArrayVar(&f.names, "name", nil, "also record the image under this reference (repeatable)")
	return cmd
}

func runImportImage(ctx context.Context, g *globals, f *importImageFlags, source string) error {
	if f.authFile == "" {
		f.authFile = os.Getenv("REGISTRY_AUTH_FILE") // podman's variable, as podman reads it
	}
	opts := engine.ImageOptions{Username: f.username, AuthFile: f.authFile, Insecure: f.insecure, Names: f.names, Log: g.logger()}
	if f.passwordStdin && f.username == "" {
		return fmt.Errorf("%w: --password-stdin needs --username", errUsage)
	}
	if f.passwordStdin {
		pw, err := bufio.NewReader(os.Stdin).ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("%w: reading the password from stdin: %v", errUsage, err)
		}
		opts.Password = strings.TrimRight(pw, "\r\n")
	}
	c, err := g.openCache(false)
	if err != nil {
		return err
	}
	if !g.json {
		opts.Progress = func(p rootfs.LayerProgress) {
			fmt.Fprintf(os.Stderr, "layer %d/%d %s -> %s\n", p.Index+1, p.Count, shortDigest(strings.TrimPrefix(p.DiffID, "sha256:")), p.Layer.Short())
		}
	}
	imp, err := c.ImportImage(ctx, source, opts)
	if err != nil {
		return imageError(err)
	}
	if g.json {
		return printJSON(imp)
	}
	fmt.Printf("image %s (%s, %d layers)\n", imp.Digest, or(imp.Platform, "platform unknown"), len(imp.Layers))
	for _, r := range imp.Refs {
		fmt.Printf("  ref %s\n", r)
	}
	return nil
}

// imageError makes an error about an image (missing, malformed, hostile,
// unreachable, refused credentials) exit 2 with its one line, as usage
// errors do.
func imageError(err error) error {
	if errors.Is(err, rootfs.ErrAuth) {
		return &exitError{code: exitUsage, msg: err.Error(), kind: string(api.CodeUnauthorized)}
	}
	if errors.Is(err, rootfs.ErrImage) {
		return &exitError{code: exitUsage, msg: err.Error(), kind: "bad_image"}
	}
	return err
}

// applyImage puts the image --image names under the sandbox: its layers
// instead of the host base (the --layer dirs go above them), its Env
// before the caller's, its WorkingDir unless -w is given and, in root
// mode, its User. The returned func releases the layers' lease.
func (f *specFlags) applyImage(ctx context.Context, g *globals, spec *engine.SandboxConfig) (func(), error) {
	if f.image == "" {
		return func() {}, nil
	}
	if f.root != "" || f.hostBase {
		return nil, fmt.Errorf("%w: --image is the sandbox's root; it does not go with --root or --host-base", errUsage)
	}
	c, err := g.openCache(true)
	if err != nil {
		return nil, err
	}
	ir, err := c.ImageRoot(ctx, f.image)
	if err != nil {
		return nil, imageError(err)
	}
	if err := ir.Configure(spec); err != nil {
		ir.Lease.Release()
		return nil, imageError(err)
	}
	return func() { ir.Lease.Release() }, nil
}

func newCacheImagesCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "images",
		Short:   "List imported images: refs, layers, file bytes, disk bytes, bytes shared with the rest of the cache",
		Example: "  msb cache images\n  msb cache images --json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.openCache(true)
			if err != nil {
				return err
			}
			imgs, err := c.Images(cmd.Context())
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(imgs)
			}
			t := newTable("IMAGE", "REF", "LAYERS", "FILES", "ON DISK", "SHARED")
			for _, im := range imgs {
				t.row(shortDigest(strings.TrimPrefix(im.Digest, "sha256:")), refCell(im.Refs), strconv.Itoa(im.Layers),
					fmtSize(im.FileBytes), fmtSize(im.DiskBytes), fmtSize(im.SharedBytes))
			}
			return t.flush()
		},
	}
}
