//go:build !msblean

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
	condaShim bool
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
else localhost/msb-export/<NAME>:latest).

--conda-shim (with --dataset) adds a layer with /opt/miniconda3/bin/activate
and /opt/miniconda3/envs/testbed, so that scripts written for the SWE-bench
harness's instance images (source /opt/miniconda3/bin/activate; conda
activate testbed) run on the image: the venv stands in for conda's env.`,
		Example: `  msb cache export-image debian:bookworm oci-archive:bookworm.tar
  podman load -i bookworm.tar && podman run --rm docker.io/library/debian:bookworm cat /etc/os-release
  msb cache export-image --dataset demo/dataset.jsonl demo__calc-1 docker-archive:task.tar:localhost/task:1
  msb cache export-image --dataset verified.jsonl --conda-shim pallets__flask-5014 \
    oci-archive:flask.tar:swebench/sweb.eval.x86_64.pallets_1776_flask-5014:latest`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runExportImage(cmd.Context(), g, f, args[0], args[1])
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.dataset, "dataset", "", "NAME is an instance id of this dataset (JSON, JSONL or Parquet)")
	fs.StringVar(&f.specFile, "spec", "", "YAML spec file adding or overriding specs (with --dataset)")
	fs.BoolVar(&f.condaShim, "conda-shim", false, "add /opt/miniconda3/bin/activate: conda activate testbed activates the venv, as in SWE-bench's images (with --dataset)")
	return cmd
}

func runExportImage(ctx context.Context, g *globals, f *exportImageFlags, nameArg, dest string) error {
	if f.condaShim && f.dataset == "" {
		return fmt.Errorf("%w: --conda-shim needs --dataset: it activates an instance's venv", errUsage)
	}
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
	opts := rootfs.ExportOptions{Reference: exportReference(st, nameArg)}
	if f.condaShim {
		opts.Extra = condaShim(envcache.VenvPath)
	}
	ex, err := rootfs.Export(ctx, st, root, dest, opts)
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

// condaShimDir is where the SWE-bench harness's images have conda.
const condaShimDir = "/opt/miniconda3"

// condaShim stands in for the conda of the SWE-bench harness's instance
// images, whose eval scripts (and those derived from them, as Harbor's
// SWE-bench adapter's test.sh) run "source /opt/miniconda3/bin/activate"
// then "conda activate testbed": activate defines a conda function whose
// activate puts venv first on PATH (as VIRTUAL_ENV and CONDA_PREFIX), and
// envs/testbed is a link to venv, for scripts that name its python by path.
func condaShim(venv string) []rootfs.ExtraFile {
	script := strings.ReplaceAll(condaActivate, "@VENV@", venv)
	return []rootfs.ExtraFile{
		{Path: condaShimDir + "/bin/activate", Mode: 0o755, Content: []byte(script)},
		{Path: condaShimDir + "/envs/testbed", Target: venv},
	}
}

// condaActivate is the shim's activate script (POSIX sh; sourced, also
// under set -u). "source activate testbed" activates testbed too, as
// conda's own activate does; other arguments are left alone, since bash
// hands a sourced file the caller's own arguments when it names none.
const condaActivate = `# Written by msb cache export-image --conda-shim: this image has no conda,
# one environment, testbed, the venv @VENV@; "conda activate testbed"
# activates it, as in the SWE-bench harness's images.
conda() {
	case "${1:-}" in
	activate)
		if [ "${2:-testbed}" != testbed ]; then
			echo "conda: this image has one environment, testbed (the venv @VENV@), not ${2}" >&2
			return 1
		fi
		VIRTUAL_ENV=@VENV@ CONDA_PREFIX=@VENV@ CONDA_DEFAULT_ENV=testbed
		case ":$PATH:" in
		*:@VENV@/bin:*) ;;
		*) PATH="@VENV@/bin:$PATH" ;;
		esac
		export VIRTUAL_ENV CONDA_PREFIX CONDA_DEFAULT_ENV PATH
		hash -r 2>/dev/null || :
		;;
	deactivate)
		PATH="${PATH#@VENV@/bin:}"
		unset VIRTUAL_ENV CONDA_PREFIX CONDA_DEFAULT_ENV
		;;
	*)
		echo "conda: this image (exported by msb) answers conda activate and conda deactivate only" >&2
		return 1
		;;
	esac
}
if [ "${1:-}" = testbed ]; then
	conda activate testbed
fi
`
