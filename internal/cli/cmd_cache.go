//go:build !msblean

package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/engine"
)

func newCacheCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cache",
		Short: "Build, inspect and move the environment cache (layers of environments and repositories)",
		Example: `  msb cache build --dataset demo/dataset.jsonl --spec demo/specs.yaml
  msb cache du`,
	}
	cmd.AddCommand(newCacheBuildCmd(g), newCacheLsCmd(g), newCacheDuCmd(g), newCacheVerifyCmd(g),
		newCacheRmCmd(g), newCacheGCCmd(g), newCacheCompactCmd(g), newCacheExportCmd(g), newCacheImportCmd(g), newCacheServeCmd(g),
		newCachePullCmd(g), newCacheImportRootfsCmd(g), newCacheImportImageCmd(g),
		newCacheImagesCmd(g), newCacheBaseCmd(g), newCacheExportImageCmd(g))
	return cmd
}

// openCache opens the cache alone; inspection commands require that it
// exists (and create nothing when it does not).
func (g *globals) openCache(mustExist bool) (*engine.Cache, error) {
	cfg, err := g.settings.cacheConfig(engineOptions{mustExist: mustExist, newCache: !mustExist})
	if err != nil {
		return nil, err
	}
	return engine.OpenCache(cfg, g.logger())
}

type cacheBuildFlags struct {
	datasetFlags
	envFlags
	workers int
}

func newCacheBuildCmd(g *globals) *cobra.Command {
	f := &cacheBuildFlags{}
	cmd := &cobra.Command{
		Use:   "build",
		Short: "Build the environment and repository layers of a dataset's instances (each once)",
		Example: `  msb cache build --dataset demo/dataset.jsonl --spec demo/specs.yaml
  msb cache build --dataset mine.jsonl --workers 8 --wheelhouse ./wheels --system-site-packages \
      --repo-source acme/proj=/srv/git/proj.git --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return runCacheBuild(cmd.Context(), g, f) },
	}
	fs := cmd.Flags()
	f.datasetFlags.register(fs)
	f.envFlags.register(fs)
	fs.IntVar(&f.workers, "workers", 4, "instances prepared at once (at least 1; the same environment is still built once)")
	return cmd
}

func runCacheBuild(ctx context.Context, g *globals, f *cacheBuildFlags) error {
	if f.workers < 1 {
		return fmt.Errorf("%w: --workers %d: at least 1", errUsage, f.workers)
	}
	e, err := g.openEngine(ctx, engineOptions{env: &f.envFlags, specFile: f.specFile, newCache: true})
	if err != nil {
		return err
	}
	defer e.Close()
	d, err := f.load(e)
	if err != nil {
		return err
	}
	n := len(d.Selected)
	prog := newProgress("building", n*len(engine.BuildPhases), g.json)
	bp := newBuildProgress(prog, "building")
	bp.phaseSteps, bp.total = true, n
	rep, runErr := e.Build(ctx, engine.BuildRun{InstanceIDs: ids(d), Workers: f.workers, SkippedRows: len(d.RowErrors), Events: bp.event})
	prog.stop()
	if g.json {
		if err := printJSON(rep); err != nil {
			return err
		}
	} else if err := printBuildReport(rep); err != nil {
		return err
	}
	switch {
	case runErr != nil:
		return runErr
	case rep.Failed > 0:
		return &exitError{code: exitFailure, msg: fmt.Sprintf("%d of %d instances failed to build", rep.Failed, len(rep.Instances))}
	}
	return nil
}

// refCellWidth is the width of cache ls's REF column: with the others
// (63 columns) the table fits outputWidth.
const refCellWidth = 37

// refCell is a layer's refs in a table cell: the first, its digests cut
// to 12 characters, "+N" for the others, cut to refCellWidth.
func refCell(refs []string) string {
	if len(refs) == 0 {
		return "-"
	}
	s := longHex.ReplaceAllStringFunc(refs[0], shortDigest)
	if len(refs) > 1 {
		s += fmt.Sprintf(" +%d", len(refs)-1)
	}
	if r := []rune(s); len(r) > refCellWidth {
		s = string(r[:refCellWidth-1]) + "…"
	}
	return s
}

// longHex is a digest or commit id in a ref.
var longHex = regexp.MustCompile(`[0-9a-f]{16,}`)

// shortDigest is a hex digest cut to 12 characters, as git shows commits.
func shortDigest(h string) string { return h[:min(12, len(h))] }

func printBuildReport(rep api.BuildReport) error {
	t := newTable("INSTANCE", "STATUS", "ENV", "MIRROR", "CHECKOUT", "ENV BUILD", "INSTALL", "COMMIT", "DETAIL")
	var problems []problem
	for _, r := range rep.Instances {
		key := r.EnvKey
		if len(key) > 12 {
			key = key[:12]
		}
		detail := r.Error
		if r.Log != "" {
			detail += "\nbuild log: " + r.Log
		}
		p := r.Timings
		t.row(r.InstanceID, string(r.Status), or(key, "-"), fmtNs(p.Mirror), fmtNs(p.Checkout), fmtNs(p.EnvBuild), fmtNs(p.Install), fmtNs(p.Commit), firstLine(detail))
		if r.Status == api.BuildFailed {
			problems = append(problems, problem{r.InstanceID, detail})
		}
	}
	if err := t.flush(); err != nil {
		return err
	}
	printProblems(os.Stdout, "Failed", problems)
	fmt.Printf("\n%d built, %d reused, %d failed, %d interrupted (%d environment builds, %d install layers, %d repository layers)\n",
		rep.Built, rep.Reused, rep.Failed, rep.Interrupted, rep.EnvBuilds, rep.InstallBuilds, rep.RepoBuilds)
	return nil
}

func newCacheLsCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "ls",
		Short:   "List layers (environments, repository commits, bases): file bytes, disk bytes, bytes no other layer shares, last use",
		Example: "  msb cache ls\n  msb cache ls --json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.openCache(true)
			if err != nil {
				return err
			}
			l, err := c.Listing(cmd.Context())
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(l)
			}
			t := newTable("LAYER", "KIND", "REF", "FILES", "ON DISK", "NOT SHARED", "LAST USE")
			for _, x := range l.Layers {
				last := x.LastUse
				if tm, err := time.Parse(time.RFC3339, x.LastUse); err == nil {
					last = tm.Local().Format("2006-01-02")
				}
				t.row(shortDigest(strings.TrimPrefix(x.ID, "sha256:")), or(x.Kind, "-"), refCell(x.Refs),
					fmtSize(x.FileBytes), fmtSize(x.DiskBytes), fmtSize(x.UniqueBytes), last)
			}
			if err := t.flush(); err != nil {
				return err
			}
			fmt.Println("\nFILES: the sum of the layer's file sizes; ON DISK: the blocks its files take; NOT SHARED: the part\nof those no other layer uses. Digests are cut to 12 characters and a layer's first ref is shown:\n--json has them all.")
			for _, f := range l.Failures {
				fmt.Printf("failed %s %s (%s): %s; log %s\n", or(f.Kind, "env"), f.Key[:min(12, len(f.Key))], f.EnvKey, f.Reason, f.Log)
			}
			return nil
		},
	}
}

func newCacheDuCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "du",
		Short:   "Disk use: the layers' files as separate copies, shared, and everything on disk; the dedup ratio",
		Example: "  msb cache du\n  msb cache du --json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.openCache(true)
			if err != nil {
				return err
			}
			u, err := c.Usage(cmd.Context())
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(u)
			}
			fmt.Printf("cache %s: %d layers, %d objects, %d shared files\n", u.Dir, u.Layers, u.Objects, u.Inodes)
			fmt.Printf("layers' files as separate copies %s; shared on disk %s (dedup ratio %.2fx)\n", fmtBytes(u.FileBytes), fmtBytes(u.TreeBytes), u.DedupRatio)
			fmt.Printf("everything on disk %s (the shared files, the layers' directories, manifests)\n", fmtBytes(u.DiskBytes))
			if u.Compacted > 0 || u.Compressed > 0 {
				fmt.Printf("%d layers cold (msb cache compact); %d objects compressed, %s on disk\n", u.Compacted, u.Compressed, fmtBytes(u.CompressedBytes))
			}
			if u.Shifted > 0 {
				fmt.Printf("of which %d shifted layers %s (rootless sandboxes' copies of what an image's user owns)\n", u.Shifted, fmtBytes(u.ShiftedBytes))
			}
			if u.Compression != "" {
				fmt.Printf("compressed with %s: the sizes above are before compression; the disk holds less (compsize -x %s, as root, says how much)\n", u.Compression, filepath.Join(u.Dir, "store"))
			}
			return nil
		},
	}
}

func newCacheVerifyCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "verify",
		Short:   "Re-hash every object and layer; report corruption and the layers it affects",
		Example: "  msb cache verify\n  msb cache verify --json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.openCache(true)
			if err != nil {
				return err
			}
			rep, err := c.Verify(cmd.Context())
			if err != nil {
				return err
			}
			if g.json {
				if err := printJSON(rep); err != nil {
					return err
				}
			} else {
				fmt.Printf("checked %d objects, %d inodes, %d layers (%s) in %s\n", rep.Objects, rep.Inodes, rep.Layers, fmtBytes(rep.BytesHashed), rep.Dir)
				for _, p := range rep.Problems {
					fmt.Printf("%s %s: %s (layers %s)\n", p.Kind, p.Path, p.Detail, strings.Join(p.Layers, ", "))
				}
			}
			if !rep.OK {
				return &exitError{code: exitFailure, msg: fmt.Sprintf("%d problems in %s", len(rep.Problems), rep.Dir)}
			}
			return nil
		},
	}
}

func newCacheCompactCmd(g *globals) *cobra.Command {
	var unusedFor time.Duration
	var all bool
	cmd := &cobra.Command{
		Use:   "compact [REF|DIGEST...]",
		Short: "Make layers cold: remove their trees and keep the objects only they used zstd-compressed, until their next use",
		Long: `Make layers cold: remove their trees and keep the objects only they used zstd-compressed.

A cold layer is made again (its objects decompressed and checked) at its next
use, once; what a running sandbox uses is never touched. Layers are those
named, and those unused for --unused-for (default 7 days when none is named),
or every one with --all. On a filesystem that compresses (btrfs with msb's
property) it saves little; on ext4 or XFS a cache of SWE-bench environments shrank 2.8x (docs/bench.md).`,
		Example: "  msb cache compact\n  msb cache compact --unused-for 24h\n  msb cache compact --all --json\n  msb cache compact env/<key>",
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.openCache(true)
			if err != nil {
				return err
			}
			age := unusedFor
			switch {
			case all:
				age = 0
			case !cmd.Flags().Changed("unused-for") && len(args) > 0:
				age = -1 // only the named ones
			}
			rep, err := c.Compact(cmd.Context(), age, args)
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(rep)
			}
			fmt.Printf("compacted %d layers (%d left: in use); compressed %d objects, %s -> %s (%d kept raw: no block to gain; %d skipped: linked elsewhere); freed %s\n",
				len(rep.Layers), rep.Leased, rep.Objects, fmtBytes(rep.RawBytes), fmtBytes(rep.CompressedBytes), rep.KeptRaw, rep.Skipped, fmtBytes(rep.FreedBytes))
			return nil
		},
	}
	cmd.Flags().DurationVar(&unusedFor, "unused-for", 7*24*time.Hour, "compact the layers not used for this long")
	cmd.Flags().BoolVar(&all, "all", false, "compact every layer no running sandbox uses")
	return cmd
}

func newCacheRmCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "rm REF|GLOB...",
		Short: "Remove refs (names, or globs such as 'repo/acme/proj@*'); msb cache gc then frees what only they used",
		Long: `Remove refs (names, or globs such as 'repo/acme/proj@*'); msb cache gc then frees what only they used.

A layer is made again at its next use once its ref is gone: remove the refs of
layers built before their inputs changed (a repository layer made while a
submodule's source was missing from --repos-dir). A pattern that matches no
ref is an error, and then nothing is removed.`,
		Example: "  msb cache rm 'repo/demo/calc@*'\n  msb cache rm repo/demo/calc@<commit> --json",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.openCache(true)
			if err != nil {
				return err
			}
			removed, err := c.RemoveRefs(args)
			if g.json && err == nil {
				return printJSON(removed)
			}
			for _, r := range removed {
				fmt.Printf("removed ref %s (layer %s)\n", r.Ref, r.Layer)
			}
			return err
		},
	}
}

func newCacheGCCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "gc",
		Short:   "Remove layers no ref and no running sandbox uses, and what only they used",
		Example: "  msb cache gc\n  msb cache gc --json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.openCache(true)
			if err != nil {
				return err
			}
			rep, err := c.GC(cmd.Context())
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(rep)
			}
			fmt.Printf("removed %d layers, %d inodes, %d objects, %d stale leases, %d temp files; freed %s; kept %d layers\n",
				len(rep.Layers), rep.Inodes, rep.Objects, rep.Leases, rep.Temp, fmtBytes(rep.FreedBytes), rep.Kept)
			if rep.Shifted > 0 {
				fmt.Printf("of which %d shifted layers (their layers gone) %s\n", rep.Shifted, fmtBytes(rep.ShiftedBytes))
			}
			for _, r := range rep.DanglingRefs {
				fmt.Println("dangling ref (layer missing):", r)
			}
			return nil
		},
	}
}

func newCacheExportCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "export FILE [REF|DIGEST...]",
		Short: "Write layers (with their parents, objects and refs) to a zstd archive; all refs when none are named",
		Example: `  msb cache export envs.msb.zst
  msb cache export one.msb.zst repo/demo/calc@<commit>`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.openCache(true)
			if err != nil {
				return err
			}
			out, err := os.Create(args[0])
			if err != nil {
				return err
			}
			rep, err := c.Export(cmd.Context(), out, args[1:])
			if cerr := out.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				os.Remove(args[0])
				return err
			}
			fi, err := os.Stat(args[0])
			if err != nil {
				return err
			}
			rep.File, rep.ArchiveBytes = args[0], fi.Size()
			if g.json {
				return printJSON(rep)
			}
			fmt.Printf("exported %d layers and %d refs to %s (%s)\n", len(rep.Layers), len(rep.Refs), rep.File, fmtBytes(rep.ArchiveBytes))
			return nil
		},
	}
}

func newCacheImportCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "import FILE",
		Short:   "Read an archive written by msb cache export: verify, store what is new, set its refs",
		Example: "  msb cache import envs.msb.zst",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			in, err := os.Open(args[0])
			if err != nil {
				return fmt.Errorf("%w: %w", errNoInput, err)
			}
			defer in.Close()
			c, err := g.openCache(false)
			if err != nil {
				return err
			}
			rep, err := c.Import(cmd.Context(), in)
			if err != nil {
				return err
			}
			rep.File = args[0]
			if g.json {
				return printJSON(rep)
			}
			fmt.Printf("imported %d layers, %d new objects (%s), %d refs\n", len(rep.Layers), rep.Objects, fmtBytes(rep.Bytes), len(rep.Refs))
			return nil
		},
	}
}

func newCacheServeCmd(g *globals) *cobra.Command {
	var listen string
	cmd := &cobra.Command{
		Use:     "serve",
		Short:   "Serve this cache's layers read-only over HTTP, for msb cache pull on other nodes",
		Example: "  msb cache serve --listen 127.0.0.1:7070",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.openCache(true)
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return err
			}
			srv := &http.Server{Handler: c.Handler(), ReadHeaderTimeout: 10 * time.Second}
			go func() {
				<-cmd.Context().Done()
				srv.Close()
			}()
			fmt.Fprintf(os.Stderr, "serving %s on http://%s\n", c.Dir(), ln.Addr())
			if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:7070", "address to listen on")
	return cmd
}

func newCachePullCmd(g *globals) *cobra.Command {
	var ref string
	cmd := &cobra.Command{
		Use:   "pull URL DIGEST|REF",
		Short: "Fetch a layer and its parents from another node's msb cache serve, only what is missing here",
		Example: `  msb cache pull http://node2.example:7070 sha256:5f1e...
  msb cache pull http://node2.example:7070 repo/acme/proj@0123abcd`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.openCache(false)
			if err != nil {
				return err
			}
			rep, err := c.Pull(cmd.Context(), args[0], args[1], ref)
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(rep)
			}
			fmt.Printf("pulled %s: %d new layers, %d objects (%s); refs %s\n", args[1], len(rep.Layers), rep.Objects, fmtBytes(rep.Bytes), or(strings.Join(rep.Refs, ", "), "none"))
			return nil
		},
	}
	cmd.Flags().StringVar(&ref, "ref", "", "point this ref at the pulled layer (default: the ref pulled by name); without one, the next gc may remove it")
	return cmd
}

func newCacheImportRootfsCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "import-rootfs DIR",
		Short: "Commit a root filesystem tree (debootstrap dir, exported image) as the base layer (ref base/rootfs)",
		Example: `  debootstrap bookworm /srv/rootfs && msb cache import-rootfs /srv/rootfs
  msb cache build --dataset mine.jsonl --base base/rootfs --python 3.11=/usr/bin/python3.11`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.openCache(false)
			if err != nil {
				return err
			}
			ref, err := c.ImportRootfs(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(ref)
			}
			fmt.Printf("base layer %s (ref %s)\n", ref.Layer, ref.Ref)
			return nil
		},
	}
}
