package cli

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/minisandbox/msb/internal/bench"
)

// newBenchImagesCmd is `msb bench images`: msb's image import against
// podman pull, on two images it builds and serves from a registry on
// loopback, and task ready on the imported image.
func newBenchImagesCmd(g Host) *cobra.Command {
	o := bench.ImagesOptions{}
	var out string
	var aFiles, bFiles []string
	cmd := &cobra.Command{
		Use:   "images",
		Short: "Import of a 1 GiB image of 5 layers (msb cache import-image vs podman pull), disk of a second image sharing its base, task ready on it",
		Long: `Builds two images from Debian's packages (an mmdebstrap base and layers of package files;
A about 1 GiB in 5 layers, B on the same base with other layers), pushes them to Debian's
docker-registry started on 127.0.0.1 (stopped after), then, rounds interleaved: msb cache
import-image of A into a new cache dir and podman pull of A into a new graph root, each timed as a
whole command, the store's disk after it, and B imported into the same store (the disk it adds
against B's unique file bytes). Then task ready (sandbox made, shell started, first command
answered) on the imported A, on the host base, and podman run of the pulled A. Writes the same
files as msb bench into --out; docs/images.md, "Numbers", has the method and results.`,
		Example: `  msb bench images
  msb bench images --rounds 5 --ready-rounds 20 --out /tmp/msb-bench-images
  msb bench images --base-rootfs /tmp/bash-root --a-files 30x4KiB,3x300000B --b-files 10x8KiB \
    --rounds 1 --ready-rounds 30 --warmup 2`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var err error
			if o.A, err = parseFileLayers("a-files", aFiles); err != nil {
				return err
			}
			if o.B, err = parseFileLayers("b-files", bFiles); err != nil {
				return err
			}
			cfg, err := g.EngineConfig()
			if err != nil {
				return err
			}
			o.Logger = g.Logger()
			o.MSBArgs = []string{"--state-dir", g.StateDir()}
			o.Progress = func(line string) { fmt.Fprintln(os.Stderr, "msb bench:", line) }
			rep, err := bench.Images(cmd.Context(), cfg, o)
			return finishReport(g, out, rep, err)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Work, "work", defaultBenchWork(), "work dir (podman's configuration; the run's fixture and stores, removed after)")
	f.StringVar(&out, "out", "msb-bench-images-out", "where the tables and CSV files are written")
	f.IntVar(&o.Rounds, "rounds", 3, "interleaved rounds of the import of A then B")
	f.IntVar(&o.ReadyRounds, "ready-rounds", 10, "interleaved rounds of task ready")
	f.IntVar(&o.Warmup, "warmup", 0, "rounds run first and not recorded")
	f.StringSliceVar(&aFiles, "a-files", nil, "A's layers above the base as generated files, one COUNTxSIZE each (30x4KiB,3x300000B), instead of Debian's packages: small images, no download")
	f.StringSliceVar(&bFiles, "b-files", nil, "B's layers above the base as generated files, as --a-files")
	f.StringVar(&o.BaseRootfs, "base-rootfs", "", "root filesystem of the images' base layer (default: mmdebstrap minbase of the host's suite with python3 and git)")
	return cmd
}

// parseFileLayers reads --a-files or --b-files: layers of generated files,
// COUNTxSIZE each (a size as --sizes takes it); none is nil (the default
// layers of packages).
func parseFileLayers(flag string, ss []string) ([]bench.ImageLayer, error) {
	var out []bench.ImageLayer
	for _, s := range ss {
		count, size, ok := strings.Cut(s, "x")
		var n int
		if _, err := fmt.Sscan(count, &n); !ok || err != nil || n < 1 || fmt.Sprint(n) != count {
			return nil, fmt.Errorf("%w: --%s %q: want COUNTxSIZE, such as 30x4KiB", errUsage, flag, s)
		}
		sizes, err := parseSizes([]string{size})
		if err != nil || sizes[0] < 1 {
			return nil, fmt.Errorf("%w: --%s %q: want COUNTxSIZE with a positive size (B, KiB, MiB or GiB)", errUsage, flag, s)
		}
		out = append(out, bench.ImageLayer{Files: n, FileSize: sizes[0]})
	}
	return out, nil
}
