package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/minisandbox/msb/internal/dataset"
	"github.com/minisandbox/msb/internal/envcache"
	"github.com/minisandbox/msb/internal/spec"
	"github.com/minisandbox/msb/internal/store"
	"github.com/spf13/cobra"
)

// cacheFlags are shared by the cache subcommands.
type cacheFlags struct {
	dir      string
	ioBudget string
}

func (f *cacheFlags) budget() (*store.Budget, error) {
	n, err := parseBytes(f.ioBudget)
	if err != nil {
		return nil, fmt.Errorf("%w: --io-budget: %v", errUsage, err)
	}
	if n == 0 {
		return nil, nil
	}
	return store.NewBudget(n), nil
}

// open opens the cache; commands that build pass a runtime in o.
func (f *cacheFlags) open(g *globals, o envcache.Options) (*envcache.Cache, error) {
	b, err := f.budget()
	if err != nil {
		return nil, err
	}
	o.Dir, o.Budget, o.Logger = f.dir, b, g.logger()
	return envcache.Open(o)
}

func newCacheCmd(g *globals) *cobra.Command {
	f := &cacheFlags{}
	cmd := &cobra.Command{
		Use:   "cache",
		Short: "Build, inspect and move the environment cache (layers of environments and repositories)",
		Example: `  msb cache build --dataset instances.jsonl --workers 4
  msb cache du`,
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&f.dir, "cache", envOr("MSB_CACHE", envcache.DefaultDir()), "cache directory (env MSB_CACHE)")
	pf.StringVar(&f.ioBudget, "io-budget", "2G", "bytes of copying/building in flight at once, e.g. 512M, 2G (0: unbounded)")
	cmd.AddCommand(newCacheBuildCmd(g, f), newCacheLsCmd(g, f), newCacheDuCmd(g, f), newCacheVerifyCmd(g, f),
		newCacheGCCmd(g, f), newCacheExportCmd(g, f), newCacheImportCmd(g, f), newCacheServeCmd(g, f),
		newCachePullCmd(g, f), newCacheImportRootfsCmd(g, f))
	return cmd
}

type cacheBuildFlags struct {
	datasetFlags
	envFlags
	workers int
}

func newCacheBuildCmd(g *globals, cf *cacheFlags) *cobra.Command {
	f := &cacheBuildFlags{}
	cmd := &cobra.Command{
		Use:   "build",
		Short: "Build the environment and repository layers of a dataset's instances (each once)",
		Example: `  msb cache build --dataset /work/shared/datasets/swe-bench-verified.jsonl --instances astropy__astropy-12907 \
      --python 3.9=/root/.pyenv/versions/3.9.18/bin/python3.9
  msb cache build --dataset mine.jsonl --workers 8 --wheelhouse ./wheels --system-site-packages \
      --repo-source acme/proj=/srv/git/proj.git --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return runCacheBuild(cmd.Context(), g, cf, f) },
	}
	fs := cmd.Flags()
	f.datasetFlags.register(fs)
	f.envFlags.register(fs)
	fs.IntVar(&f.workers, "workers", 4, "instances prepared at once (the same environment is still built once)")
	return cmd
}

// buildResult is one instance's line in the summary.
type buildResult struct {
	Instance string                   `json:"instance_id"`
	Status   string                   `json:"status"` // built, reused, failed
	EnvKey   string                   `json:"env_key,omitempty"`
	Error    string                   `json:"error,omitempty"`
	Log      string                   `json:"log,omitempty"`
	Timings  map[string]time.Duration `json:"timings_ns,omitempty"`
}

func runCacheBuild(ctx context.Context, g *globals, cf *cacheFlags, f *cacheBuildFlags) error {
	insts, ov, err := f.load()
	if err != nil {
		return err
	}
	o, err := f.options()
	if err != nil {
		return err
	}
	if o.Runtime, err = g.jobRuntime(); err != nil {
		return err
	}
	c, err := cf.open(g, o)
	if err != nil {
		return err
	}
	prog := newBuildProgress(len(insts), !g.json)
	results := make([]buildResult, len(insts))
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range max(f.workers, 1) {
		wg.Go(func() {
			for i := range jobs {
				results[i] = buildOne(ctx, c, insts[i], ov, prog.event)
				prog.finished(results[i])
			}
		})
	}
	for i := range insts {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	prog.stop()
	return printBuildSummary(g, c, results)
}

func buildOne(ctx context.Context, c *envcache.Cache, inst dataset.Instance, ov *spec.Overrides, ev envcache.Progress) buildResult {
	r := buildResult{Instance: inst.InstanceID}
	sp, err := spec.Resolve(inst, ov)
	if err == nil {
		var p *envcache.Prepared
		if p, err = c.Prepare(ctx, inst, sp, ev); err == nil {
			p.Release()
			r.Status, r.EnvKey, r.Timings = "built", p.EnvKey, p.Timings
			if p.Reused {
				r.Status = "reused"
			}
			return r
		}
	}
	r.Status, r.Error = "failed", err.Error()
	var be *envcache.BuildError
	if errors.As(err, &be) {
		r.Error, r.Log, r.EnvKey = be.Reason, be.Log, be.Key
		if be.Recorded {
			r.Error += " (recorded earlier; --retry-failed to build again)"
		}
	}
	return r
}

// buildProgress draws one status line: instances done, and how many are in
// each phase now.
type buildProgress struct {
	mu      sync.Mutex
	total   int
	done    int
	failed  int
	active  map[string]int // phase -> instances in it
	tty     bool
	stopped bool
}

func newBuildProgress(total int, show bool) *buildProgress {
	fi, err := os.Stderr.Stat()
	tty := show && err == nil && fi.Mode()&os.ModeCharDevice != 0
	return &buildProgress{total: total, active: map[string]int{}, tty: tty}
}

func (p *buildProgress) event(e envcache.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e.Done {
		p.active[e.Phase]--
	} else {
		p.active[e.Phase]++
	}
	p.draw()
}

func (p *buildProgress) finished(r buildResult) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done++
	if r.Status == "failed" {
		p.failed++
	}
	if !p.tty {
		return
	}
	if r.Status == "failed" {
		fmt.Fprintf(os.Stderr, "\r\033[K%s: failed: %s\n", r.Instance, oneLine(r.Error))
	}
	p.draw()
}

func (p *buildProgress) draw() {
	if !p.tty || p.stopped {
		return
	}
	const width = 30
	n := width * p.done / max(p.total, 1)
	var phases []string
	for _, ph := range []string{envcache.PhaseMirror, envcache.PhaseCheckout, envcache.PhaseEnvBuild, envcache.PhaseCommit} {
		phases = append(phases, fmt.Sprintf("%s %d", ph, max(p.active[ph], 0)))
	}
	fmt.Fprintf(os.Stderr, "\r\033[K[%s%s] %d/%d (%d failed) | %s", strings.Repeat("#", n), strings.Repeat(".", width-n),
		p.done, p.total, p.failed, strings.Join(phases, ", "))
}

func (p *buildProgress) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty {
		fmt.Fprintln(os.Stderr)
	}
	p.stopped = true
}

func printBuildSummary(g *globals, c *envcache.Cache, results []buildResult) error {
	count := map[string]int{}
	for _, r := range results {
		count[r.Status]++
	}
	if g.json {
		json.NewEncoder(os.Stdout).Encode(map[string]any{"built": count["built"], "reused": count["reused"], "failed": count["failed"],
			"stats": c.Stats(), "instances": results})
	} else {
		tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "INSTANCE\tSTATUS\tENV\tMIRROR\tCHECKOUT\tENV BUILD\tCOMMIT\tDETAIL")
		for _, r := range results {
			key := r.EnvKey
			if len(key) > 12 {
				key = key[:12]
			}
			detail := r.Error
			if r.Log != "" {
				detail += " (log " + r.Log + ")"
			}
			t := r.Timings
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Instance, r.Status, key, dur(t, envcache.PhaseMirror),
				dur(t, envcache.PhaseCheckout), dur(t, envcache.PhaseEnvBuild), dur(t, envcache.PhaseCommit), oneLine(detail))
		}
		tw.Flush()
		s := c.Stats()
		fmt.Printf("\n%d built, %d reused, %d failed (%d environment builds, %d repository layers)\n",
			count["built"], count["reused"], count["failed"], s.EnvBuilds, s.RepoBuilds)
	}
	if count["failed"] > 0 {
		return &exitError{code: exitFailure}
	}
	return nil
}

func dur(t map[string]time.Duration, k string) string {
	if d, ok := t[k]; ok {
		return fmtDur(d)
	}
	return "-"
}

func newCacheLsCmd(g *globals, cf *cacheFlags) *cobra.Command {
	return &cobra.Command{
		Use:     "ls",
		Short:   "List layers (environments, repository commits, bases) with logical size, unique size and last use",
		Example: "  msb cache ls\n  msb cache ls --json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.open(g, envcache.Options{})
			if err != nil {
				return err
			}
			u, err := c.Store().Usage(cmd.Context())
			if err != nil {
				return err
			}
			fails, _ := c.Failures()
			if g.json {
				return json.NewEncoder(os.Stdout).Encode(map[string]any{"layers": u.Layers, "failed": fails})
			}
			sort.Slice(u.Layers, func(i, j int) bool { return u.Layers[i].LastUse.After(u.Layers[j].LastUse) })
			tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "LAYER\tKIND\tREF\tLOGICAL\tUNIQUE\tLAST USE")
			for _, l := range u.Layers {
				ref, kind := "-", "-"
				if len(l.Refs) > 0 {
					ref = strings.Join(l.Refs, ",")
					kind, _, _ = strings.Cut(l.Refs[0], "/")
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", l.ID.Short(), kind, ref, fmtBytes(l.LogicalBytes), fmtBytes(l.UniqueBytes), l.LastUse.Local().Format("2006-01-02 15:04"))
			}
			tw.Flush()
			for _, f := range fails {
				fmt.Printf("failed env %s (%s): %s; log %s\n", f.Key[:12], f.EnvKey, f.Reason, f.Log)
			}
			return nil
		},
	}
}

func fmtBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

func newCacheDuCmd(g *globals, cf *cacheFlags) *cobra.Command {
	return &cobra.Command{
		Use:     "du",
		Short:   "Disk use: logical bytes (as separate copies), bytes on disk (st_blocks), dedup ratio",
		Example: "  msb cache du\n  MSB_CACHE=/data/msb msb cache du --json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.open(g, envcache.Options{})
			if err != nil {
				return err
			}
			u, err := c.Store().Usage(cmd.Context())
			if err != nil {
				return err
			}
			if g.json {
				return json.NewEncoder(os.Stdout).Encode(map[string]any{"dir": c.Dir(), "layers": len(u.Layers), "objects": u.Objects,
					"inodes": u.Inodes, "logical_bytes": u.LogicalBytes, "disk_bytes": u.DiskBytes, "dedup_ratio": u.DedupRatio})
			}
			fmt.Printf("cache %s: %d layers, %d objects\nlogical %s, on disk %s, dedup ratio %.2fx\n", c.Dir(), len(u.Layers), u.Objects,
				fmtBytes(u.LogicalBytes), fmtBytes(u.DiskBytes), u.DedupRatio)
			return nil
		},
	}
}

func newCacheVerifyCmd(g *globals, cf *cacheFlags) *cobra.Command {
	return &cobra.Command{
		Use:     "verify",
		Short:   "Re-hash every object and layer; report corruption and the layers it affects",
		Example: "  msb cache verify\n  msb cache verify --json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.open(g, envcache.Options{})
			if err != nil {
				return err
			}
			rep, err := c.Store().Verify(cmd.Context())
			if err != nil {
				return err
			}
			if g.json {
				json.NewEncoder(os.Stdout).Encode(rep)
			} else {
				fmt.Printf("checked %d objects, %d inodes, %d layers (%s)\n", rep.Objects, rep.Inodes, rep.Layers, fmtBytes(rep.Bytes))
				for _, p := range rep.Problems {
					fmt.Println(p.String())
				}
			}
			if !rep.OK() {
				return fmt.Errorf("%d problems in %s", len(rep.Problems), c.Store().Root())
			}
			return nil
		},
	}
}

func newCacheGCCmd(g *globals, cf *cacheFlags) *cobra.Command {
	return &cobra.Command{
		Use:     "gc",
		Short:   "Remove layers no ref and no running sandbox uses, and what only they used",
		Example: "  msb cache gc\n  msb cache gc --json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.open(g, envcache.Options{})
			if err != nil {
				return err
			}
			rep, err := c.Store().GC(cmd.Context())
			if err != nil {
				return err
			}
			if g.json {
				return json.NewEncoder(os.Stdout).Encode(rep)
			}
			fmt.Printf("removed %d layers, %d inodes, %d objects, %d stale leases, %d temp files; freed %s; kept %d layers\n",
				len(rep.Layers), rep.Inodes, rep.Objects, rep.Leases, rep.Temp, fmtBytes(rep.FreedBytes), rep.Kept)
			for _, r := range rep.DanglingRef {
				fmt.Println("dangling ref (layer missing):", r)
			}
			return nil
		},
	}
}

func newCacheExportCmd(g *globals, cf *cacheFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "export FILE [REF|DIGEST...]",
		Short: "Write layers (with their parents, objects and refs) to a zstd archive; all refs when none are named",
		Example: `  msb cache export envs.msb.zst
  msb cache export one.msb.zst repo/acme/proj@0123abcd env/5f1e...`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.open(g, envcache.Options{})
			if err != nil {
				return err
			}
			opts := store.ExportOptions{}
			for _, a := range args[1:] {
				if id, err := store.ParseLayerID(a); err == nil {
					opts.Layers = append(opts.Layers, id)
				} else {
					opts.Refs = append(opts.Refs, a)
				}
			}
			if len(args) == 1 {
				refs, err := c.Store().Refs()
				if err != nil {
					return err
				}
				for _, r := range refs {
					opts.Refs = append(opts.Refs, r.Name)
				}
			}
			out, err := os.Create(args[0])
			if err != nil {
				return err
			}
			if err := c.Store().Export(cmd.Context(), out, opts); err != nil {
				out.Close()
				os.Remove(args[0])
				return err
			}
			if err := out.Close(); err != nil {
				return err
			}
			fi, _ := os.Stat(args[0])
			if !g.json {
				fmt.Printf("exported %d refs, %d layers to %s (%s)\n", len(opts.Refs), len(opts.Layers), args[0], fmtBytes(fi.Size()))
			} else {
				json.NewEncoder(os.Stdout).Encode(map[string]any{"file": args[0], "bytes": fi.Size(), "refs": opts.Refs, "layers": opts.Layers})
			}
			return nil
		},
	}
}

func newCacheImportCmd(g *globals, cf *cacheFlags) *cobra.Command {
	return &cobra.Command{
		Use:     "import FILE",
		Short:   "Read an archive written by msb cache export: verify, store what is new, set its refs",
		Example: "  msb cache import envs.msb.zst",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.open(g, envcache.Options{})
			if err != nil {
				return err
			}
			in, err := os.Open(args[0])
			if err != nil {
				return err
			}
			defer in.Close()
			rep, err := c.Store().Import(cmd.Context(), in)
			if err != nil {
				return err
			}
			if g.json {
				return json.NewEncoder(os.Stdout).Encode(rep)
			}
			fmt.Printf("imported %d layers, %d new objects (%s), %d refs\n", len(rep.Layers), rep.Objects, fmtBytes(rep.Bytes), len(rep.Refs))
			return nil
		},
	}
}

func newCacheServeCmd(g *globals, cf *cacheFlags) *cobra.Command {
	var listen string
	cmd := &cobra.Command{
		Use:     "serve",
		Short:   "Serve this cache's layers read-only over HTTP, for msb cache pull on other nodes",
		Example: "  msb cache serve --listen 127.0.0.1:7070",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.open(g, envcache.Options{})
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return err
			}
			srv := &http.Server{Handler: c.Store().Handler(), ReadHeaderTimeout: 10 * time.Second}
			go func() {
				<-cmd.Context().Done()
				srv.Close()
			}()
			fmt.Fprintf(os.Stderr, "serving %s on http://%s\n", c.Store().Root(), ln.Addr())
			if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:7070", "address to listen on")
	return cmd
}

func newCachePullCmd(g *globals, cf *cacheFlags) *cobra.Command {
	var ref string
	cmd := &cobra.Command{
		Use:   "pull URL DIGEST|REF",
		Short: "Fetch a layer and its parents from another node's msb cache serve, only what is missing here",
		Example: `  msb cache pull http://node2.example:7070 sha256:5f1e...
  msb cache pull http://node2.example:7070 repo/acme/proj@0123abcd`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.open(g, envcache.Options{})
			if err != nil {
				return err
			}
			url := strings.TrimRight(args[0], "/")
			id, err := store.ParseLayerID(args[1])
			if err != nil {
				// a ref: ask the server what it points at
				if id, err = remoteRef(cmd.Context(), url, args[1]); err != nil {
					return err
				}
				if ref == "" {
					ref = args[1]
				}
			}
			rep, err := c.Store().Pull(cmd.Context(), url, id, store.PullOptions{})
			if err != nil {
				return err
			}
			if ref != "" {
				if err := c.Store().SetRef(cmd.Context(), ref, id); err != nil {
					return err
				}
			}
			if g.json {
				return json.NewEncoder(os.Stdout).Encode(map[string]any{"layer": id, "ref": ref, "report": rep})
			}
			fmt.Printf("pulled %s: %d layers, %d objects (%s)", id.Short(), len(rep.Layers), rep.Objects, fmtBytes(rep.Bytes))
			if ref != "" {
				fmt.Printf(", ref %s", ref)
			}
			fmt.Println()
			return nil
		},
	}
	cmd.Flags().StringVar(&ref, "ref", "", "point this ref at the pulled layer (default: the ref pulled by name); without one, the next gc may remove it")
	return cmd
}

func remoteRef(ctx context.Context, base, name string) (store.LayerID, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/refs/"+name, nil)
	if err != nil {
		return store.LayerID{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return store.LayerID{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 256))
	if err != nil {
		return store.LayerID{}, err
	}
	if resp.StatusCode != http.StatusOK {
		return store.LayerID{}, fmt.Errorf("ref %s at %s: %s", name, base, resp.Status)
	}
	return store.ParseLayerID(strings.TrimSpace(string(b)))
}

func newCacheImportRootfsCmd(g *globals, cf *cacheFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "import-rootfs DIR",
		Short: "Commit a root filesystem tree (debootstrap dir, exported image) as the base layer (ref base/rootfs)",
		Example: `  debootstrap bookworm /srv/rootfs && msb cache import-rootfs /srv/rootfs
  msb cache build --dataset mine.jsonl --base base/rootfs --python 3.11=/usr/bin/python3.11`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.open(g, envcache.Options{})
			if err != nil {
				return err
			}
			id, err := c.ImportRootfs(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if g.json {
				return json.NewEncoder(os.Stdout).Encode(map[string]any{"layer": id, "ref": envcache.RootfsRef})
			}
			fmt.Printf("base layer %s (ref %s)\n", id, envcache.RootfsRef)
			return nil
		},
	}
}
