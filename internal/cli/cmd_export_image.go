package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/minisandbox/msb/internal/engine"
	"github.com/minisandbox/msb/internal/envcache"
	"github.com/minisandbox/msb/internal/rootfs"
	"github.com/minisandbox/msb/internal/store"
)

type exportImageFlags struct {
	datasetFlags
}

func newCacheExportImageCmd(g *globals) *cobra.Command {
	f := &exportImageFlags{}
	cmd := &cobra.Command{
		Use:   "export-image NAME DEST",
		Short: "Export an image, a base, a layer stack or an instance's environment as an OCI or Docker image",
		Long: `Export the layers of a root the cache holds as an image that podman load
and podman run (or docker load) accept.

NAME is what --image and --base take: an imported image (a reference,
image/<ref> or sha256:<digest>), a Debian base (debian/<name>), a layer
or a ref (base/rootfs); or, with --dataset, an instance id: its task's
layers (base, environment, repository at the base commit, install layer),
which msb cache build must have made.

DEST is one of:
  oci-archive:FILE[:REF]      a tar of an OCI layout (podman load -i FILE)
  docker-archive:FILE[:REF]   what docker save writes (docker load -i FILE)
  oci:DIR[:REF]               an OCI image layout directory (created, or added to)

Each store layer is one image layer: deletions as .wh.NAME whiteouts,
opaque directories as .wh..wh..opq. The image's Env, WorkingDir and
User are the imported image's; an instance's are its venv's PATH and
/testbed. REF names the image (default: NAME when it is a reference,
else localhost/msb-export/<NAME>:latest).`,
		Example: `  msb cache export-image debian:bookworm oci-archive:bookworm.tar
  podman load -i bookworm.tar && podman run --rm docker.io/library/debian:bookworm cat /etc/os-release
  msb cache export-image --dataset demo/dataset.jsonl demo__calc-1 docker-archive:task.tar:localhost/task:1`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runExportImage(cmd.Context(), g, f, args[0], args[1])
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.dataset, "dataset", "", "NAME is an instance id of this dataset (JSON, JSONL or Parquet)")
	fs.StringVar(&f.specFile, "spec", "", "YAML spec file adding or overriding specs (with --dataset)")
	return cmd
}

func runExportImage(ctx context.Context, g *globals, f *exportImageFlags, nameArg, dest string) error {
	c, err := g.openCache(true)
	if err != nil {
		return err
	}
	st, err := store.Open(filepath.Join(c.Dir(), "store"))
	if err != nil {
		return err
	}
	var root rootfs.Root
	if f.dataset != "" {
		root, err = instanceRoot(ctx, g, f, st, nameArg)
	} else {
		root, err = rootfs.Resolve(st, nameArg).Root(ctx, st)
		if errors.Is(err, store.ErrNotFound) {
			err = fmt.Errorf("%w: %w (an image, a base, a layer or a ref of msb cache ls)", rootfs.ErrNoImage, err)
		}
	}
	if err != nil {
		return imageError(err)
	}
	lease, err := st.Lease(ctx, root.Layers...)
	if err != nil {
		return fmt.Errorf("leasing the layers of %s: %w", nameArg, err)
	}
	defer lease.Release()
	ex, err := rootfs.Export(ctx, st, root, dest, rootfs.ExportOptions{Reference: exportReference(st, nameArg)})
	if err != nil {
		return imageError(fmt.Errorf("exporting %s: %w", nameArg, err))
	}
	if g.json {
		return printJSON(ex)
	}
	fmt.Printf("exported %s (%d layers) to %s as %s\n", nameArg, ex.Layers, ex.Destination, ex.Reference)
	return nil
}

// instanceRoot is the root of an instance's task sandbox: the stacks of
// its environment, repository and install layers, bottom first, as
// envcache.Prepare stacks them, with the task's PATH and working dir.
func instanceRoot(ctx context.Context, g *globals, f *exportImageFlags, st *store.Store, id string) (rootfs.Root, error) {
	e, err := g.openEngine(ctx, engineOptions{specFile: f.specFile, mustExist: true})
	if err != nil {
		return rootfs.Root{}, err
	}
	defer e.Close()
	f.instances = []string{id}
	if _, err := f.load(e); err != nil {
		return rootfs.Root{}, err
	}
	ls, err := e.InstanceLayers(ctx, id)
	if err != nil {
		return rootfs.Root{}, err
	}
	root := rootfs.Root{Config: rootfs.Config{WorkingDir: envcache.Testbed, Env: []string{
		"PATH=" + envcache.VenvPath + "/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"VIRTUAL_ENV=" + envcache.VenvPath}}}
	for i, l := range ls.Layers {
		if !l.Present {
			return rootfs.Root{}, fmt.Errorf("%w: instance %s: layer %s is not in the cache (msb cache build --dataset %s --instances %s)",
				engine.ErrNotFound, id, l.Ref, f.dataset, id)
		}
		lid, err := store.ParseLayerID(l.Layer)
		if err != nil {
			return rootfs.Root{}, err
		}
		stack, err := st.Stack(lid)
		if err != nil {
			return rootfs.Root{}, err
		}
		if i == 0 && len(stack) == 1 {
			fmt.Fprintf(os.Stderr, "msb: %s's environment is on the host's root, which is not exported: the image holds its layers alone\n", id)
		}
		for j := len(stack) - 1; j >= 0; j-- {
			if !slices.Contains(root.Layers, stack[j]) {
				root.Layers = append(root.Layers, stack[j])
			}
		}
	}
	return root, nil
}

// exportReference names the exported image: NAME when it names an
// imported image by reference, else localhost/msb-export/<NAME>:latest
// spelled as a reference allows.
func exportReference(st *store.Store, nameArg string) string {
	if ref, err := rootfs.ImageRef(st, nameArg); err == nil && strings.HasPrefix(ref, "image/") && !strings.HasPrefix(ref, "image/sha256:") {
		return strings.TrimPrefix(ref, "image/")
	}
	var parts []string
	for p := range strings.SplitSeq(strings.ToLower(nameArg), "/") {
		if p = strings.Trim(refUnsafe.ReplaceAllString(p, "-"), "-._"); p != "" {
			parts = append(parts, p)
		}
	}
	ref := "localhost/msb-export/" + strings.Join(parts, "/") + ":latest"
	if _, err := rootfs.NormalizeReference(ref); err != nil || len(parts) == 0 {
		return rootfs.DefaultExportReference
	}
	return ref
}

// refUnsafe is what a component of a reference's repository cannot hold.
var refUnsafe = regexp.MustCompile(`[^a-z0-9._-]+`)
