package bench

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/minisandbox/msb/internal/engine"
	"github.com/minisandbox/msb/internal/sandbox"
)

// The images comparison (`msb bench images`) measures msb's image import
// against podman on the same two images from the same registry on
// loopback (see images_fixture.go): the import of A into an empty store
// (`msb cache import-image` into a new cache dir; `podman pull` into a new
// graph root and run root), the store's disk after it, the disk B adds
// after A against B's unique file bytes, and task ready on A against a
// sandbox of the host base and against `podman run` of A.

// MeasureImages is the images comparison's measure. Its Workload is the
// image ("a", or "b" for B after A).
const MeasureImages = "images"

// Phases of the images measure.
const (
	PhaseImport      = "import"      // the whole import command, from its start until it exited
	PhaseStore       = "store"       // the store's allocated bytes after the import (st_blocks, each inode once)
	PhaseStoreApp    = "store-app"   // the same, apparent (st_size)
	PhaseAdded       = "added"       // what B's import added to a store holding A, allocated
	PhaseAddedApp    = "added-app"   // the same, apparent
	PhaseImageFiles  = "image-files" // Method layers: the regular files' bytes of A, or of B's own layers
	PhaseUniqueFiles = "unique"      // Method layers: B's own files whose content is in no layer of A, each once
)

// Methods of the images measure besides msb and podman.
const (
	MethodMSBHostBase = "msb-host-base" // task ready: a sandbox of the host's system dirs, no image
	MethodLayers      = "layers"        // what the fixture's layers hold (no store)
)

// ImagesOptions size the images comparison.
type ImagesOptions struct {
	// Work holds the run's temp dirs (the fixture, the stores).
	Work string
	// Rounds of the import comparison and ReadyRounds of task ready, after
	// Warmup rounds not recorded.
	Rounds, ReadyRounds, Warmup int
	// BaseRootfs is the base layer's root filesystem; default an
	// mmdebstrap minbase of the host's suite with BasePackages.
	BaseRootfs   string
	BasePackages []string
	// A and B are the layers above the base (default DefaultImagesA and
	// DefaultImagesB).
	A, B []ImageLayer
	// MSB is the msb binary whose `cache import-image` is timed (default:
	// next to this executable, else on PATH), MSBArgs its global flags.
	MSB     string
	MSBArgs []string
	Logger  *slog.Logger `json:"-"`
	// Progress, when set, receives one line per step.
	Progress func(string) `json:"-"`
}

// Default images: A is about 1 GiB in 5 layers, B shares A's base.
var (
	DefaultImagesBase = []string{"python3", "git"}
	DefaultImagesA    = []ImageLayer{
		{Packages: []string{"openjdk-17-jre-headless"}},
		{Packages: []string{"gcc-12", "cpp-12", "g++-12", "libstdc++-12-dev", "libgcc-12-dev", "binutils-x86-64-linux-gnu"}},
		{Packages: []string{"libllvm15", "libclang-cpp15", "clang-15"}},
		{Packages: []string{"python3-numpy", "python3-scipy", "libpython3.11-dev", "emacs-common", "libicu72"}},
	}
	// B's first layer holds A's compilers again beside Go's toolchain: the
	// same files in another layer, as images built apart carry them.
	DefaultImagesB = []ImageLayer{
		{Packages: append(slices.Clone(DefaultImagesA[1].Packages), "golang-1.19-go")},
		{Packages: []string{"rustc", "libstd-rust-1.63"}},
	}
)

func (o *ImagesOptions) defaults() {
	if o.Rounds == 0 {
		o.Rounds = 3
	}
	if o.ReadyRounds == 0 {
		o.ReadyRounds = 10
	}
	if o.BaseRootfs == "" && o.BasePackages == nil {
		o.BasePackages = DefaultImagesBase
	}
	if o.A == nil {
		o.A = DefaultImagesA
	}
	if o.B == nil {
		o.B = DefaultImagesB
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

func (o *ImagesOptions) check() error {
	if o.Work == "" {
		return fmt.Errorf("%w: no work dir", ErrOptions)
	}
	if o.Rounds < 1 || o.ReadyRounds < 1 || o.Warmup < 0 {
		return fmt.Errorf("%w: rounds must be positive (warmup at least 0)", ErrOptions)
	}
	if len(o.A) == 0 || len(o.B) == 0 {
		return fmt.Errorf("%w: each image needs a layer above the base", ErrOptions)
	}
	for _, l := range append(append([]ImageLayer{}, o.A...), o.B...) {
		if len(l.Packages) == 0 && (l.Files < 1 || l.FileSize < 1) {
			return fmt.Errorf("%w: a layer names packages or a positive count and size of generated files", ErrOptions)
		}
	}
	return nil
}

// Images runs the images comparison and returns its report. Without
// podman, docker-registry or (for the default base) mmdebstrap the error
// is errSkipped's, saying what to install.
func Images(ctx context.Context, cfg engine.Config, o ImagesOptions) (*Report, error) {
	o.defaults()
	if err := o.check(); err != nil {
		return nil, err
	}
	work, err := filepath.Abs(o.Work)
	if err != nil {
		return nil, err
	}
	o.Work = filepath.Join(work, "images")
	if err := os.MkdirAll(o.Work, 0o755); err != nil {
		return nil, err
	}
	r := &imager{o: o, cfg: cfg}
	r.b = &bencher{o: Options{Work: work, Measures: []string{MeasureImages}, Rounds: o.Rounds, Warmup: o.Warmup, Podman: true,
		MSB: o.MSB, Logger: o.Logger, Progress: o.Progress}}
	r.b.report = imagesReport(o)
	if r.msb, err = r.b.msbBinary(); err != nil {
		return nil, err
	}
	if r.b.pm, err = newPodman(ctx, filepath.Join(work, "podman")); err != nil {
		return nil, err
	}
	r.b.report.Machine.Podman = r.b.pm.version + " (" + r.b.pm.runtime + ", cgroupfs)"
	if err := r.run(ctx); err != nil {
		return r.b.finish(), err
	}
	return r.b.finish(), ctx.Err()
}

// imagesReport is a Report of this host, its notes saying what the
// images hold.
func imagesReport(o ImagesOptions) *Report {
	var u unix.Utsname
	unix.Uname(&u)
	m := Machine{Kernel: unix.ByteSliceToString(u.Release[:]), CPU: cpuModel(), CPUs: runtime.NumCPU(), MemTotal: memTotal(),
		Go: runtime.Version(), LoadStart: loadAvg()}
	r := &Report{Started: time.Now(), Machine: m, Options: Options{Measures: []string{MeasureImages}, Rounds: o.Rounds, Warmup: o.Warmup}}
	base := "mmdebstrap --variant=minbase of " + hostSuite() + " with " + strings.Join(o.BasePackages, " ")
	if o.BaseRootfs != "" {
		base = "the tree " + o.BaseRootfs
	}
	r.Notes = append(r.Notes, fmt.Sprintf("images: A = base (%s) + %s; B = the same base + %s; %d import rounds, %d task-ready rounds",
		base, layersNote(o.A), layersNote(o.B), o.Rounds, o.ReadyRounds))
	return r
}

func layersNote(ls []ImageLayer) string {
	var s []string
	for _, l := range ls {
		s = append(s, "["+l.String()+"]")
	}
	return strings.Join(s, " + ")
}

// imager is one run of the images comparison.
type imager struct {
	o   ImagesOptions
	cfg engine.Config
	b   *bencher
	msb string
	fx  *fixture
	// kept are the stores of the last import round (both images in each),
	// on which task ready runs.
	keptCache string
	keptPM    *podman
}

func (r *imager) run(ctx context.Context) (err error) {
	stop := r.b.sampleLoad(MeasureImages, "fixture")
	r.fx, err = r.makeFixture(ctx)
	stop()
	if err != nil {
		r.removeImages() // what was built before the failure; the rest is not there
		return err
	}
	defer func() { err = errors.Join(err, r.removeImages(), r.fx.close()) }()
	r.b.add(Sample{Key: Key{Measure: MeasureImages, Workload: "a", Method: MethodLayers, Phase: PhaseImageFiles}, Round: -1, Value: float64(r.fx.aBytes), Unit: UnitBytes},
		Sample{Key: Key{Measure: MeasureImages, Workload: "b", Method: MethodLayers, Phase: PhaseImageFiles}, Round: -1, Value: float64(r.fx.bOwn), Unit: UnitBytes},
		Sample{Key: Key{Measure: MeasureImages, Workload: "b", Method: MethodLayers, Phase: PhaseUniqueFiles}, Round: -1, Value: float64(r.fx.bUnique), Unit: UnitBytes})
	defer func() { err = errors.Join(err, r.dropKept()) }()

	r.b.logf("images: import (%s)", strings.Join([]string{MethodMSB, MethodPodman}, ", "))
	stop = r.b.sampleLoad(MeasureImages, "import")
	failed := interleave(ctx, r.o.Rounds, r.o.Warmup, []string{MethodMSB, MethodPodman}, func(ctx context.Context, round, slot int, m string) error {
		return r.importTrial(ctx, m, round, slot, round == r.o.Rounds-1)
	})
	stop()
	r.failures("import", failed)

	// The host base needs no import; msb's and podman's rows need theirs.
	ready := slices.DeleteFunc([]string{MethodMSB, MethodMSBHostBase, MethodPodman}, func(m string) bool {
		return m == MethodMSB && r.keptCache == "" || m == MethodPodman && r.keptPM == nil
	})
	e, err := r.openEngine(ctx)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, e.Close()) }()
	r.b.logf("images: task ready (%s)", strings.Join(ready, ", "))
	stop = r.b.sampleLoad(MeasureImages, "ready")
	failed = interleave(ctx, r.o.ReadyRounds, r.o.Warmup, ready, func(ctx context.Context, round, slot int, m string) error {
		return r.readyTrial(ctx, e, m, round, slot)
	})
	stop()
	r.failures("ready", failed)
	return nil
}

func (r *imager) failures(what string, failed map[string]error) {
	for m, err := range failed {
		r.b.note(noteFailed, "%s %s %s: %v", MeasureImages, what, m, err)
	}
}

func (r *imager) add(image, m, phase string, round, slot int, v float64, unit string) {
	if round < 0 {
		return // warm-up
	}
	r.b.add(Sample{Key: Key{Measure: MeasureImages, Workload: image, Method: m, Phase: phase}, Round: round, Slot: slot, Value: v, Unit: unit})
}

// importTrial imports A into an empty store, then B into the same store,
// timing each and measuring the store after each. With keep, the store
// is kept for task ready.
func (r *imager) importTrial(ctx context.Context, m string, round, slot int, keep bool) (err error) {
	dir, err := os.MkdirTemp(r.o.Work, m+"-")
	if err != nil {
		return err
	}
	var imp func(ctx context.Context, ref string) error
	var remove func() error
	storeDir := dir
	switch m {
	case MethodMSB:
		imp = func(ctx context.Context, ref string) error { return r.msbImport(ctx, dir, ref) }
		remove = func() error { return os.RemoveAll(dir) }
	case MethodPodman:
		pm, err := r.b.pm.withStorage(dir)
		if err != nil {
			return err
		}
		storeDir = filepath.Join(dir, "root")
		imp = func(ctx context.Context, ref string) error {
			_, err := pm.out(ctx, "pull", "--quiet", "--tls-verify=false", ref)
			return err
		}
		remove = func() error { return removeStorage(pm) }
		if keep {
			defer func() {
				if err == nil {
					r.keptPM = pm
				}
			}()
		}
	}
	defer func() {
		if err != nil || !keep {
			err = errors.Join(err, remove())
		} else if m == MethodMSB {
			r.keptCache = dir
		}
	}()
	var before usage
	for _, img := range []struct{ name, ref string }{{"a", r.fx.a}, {"b", r.fx.b}} {
		r.b.logf("images: round %d: %s: import of %s", round, m, img.name)
		t0 := time.Now()
		if err := imp(ctx, img.ref); err != nil {
			return err
		}
		r.add(img.name, m, PhaseImport, round, slot, time.Since(t0).Seconds(), UnitSeconds)
		u, err := storeUsage(ctx, storeDir)
		if err != nil {
			return err
		}
		if img.name == "a" {
			r.add("a", m, PhaseStore, round, slot, float64(u.allocated), UnitBytes)
			r.add("a", m, PhaseStoreApp, round, slot, float64(u.apparent), UnitBytes)
		} else {
			r.add("b", m, PhaseAdded, round, slot, float64(u.allocated-before.allocated), UnitBytes)
			r.add("b", m, PhaseAddedApp, round, slot, float64(u.apparent-before.apparent), UnitBytes)
		}
		before = u
	}
	return nil
}

// msbImport runs `msb --cache DIR cache import-image --insecure docker://REF`.
func (r *imager) msbImport(ctx context.Context, cache, ref string) error {
	args := append(append([]string{}, r.o.MSBArgs...), "--cache", cache, "cache", "import-image", "--insecure", "docker://"+ref)
	cmd := exec.CommandContext(ctx, r.msb, args...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %w: %s", r.msb, strings.Join(args, " "), err, tail(string(out), 400))
	}
	return nil
}

// usage is what a tree takes on disk, each inode once.
type usage struct{ apparent, allocated int64 }

func storeUsage(ctx context.Context, dir string) (usage, error) {
	var u usage
	err := walkInodes(ctx, []string{dir}, func(_ string, fi fs.FileInfo) error {
		u.apparent += fi.Size()
		u.allocated += fi.Sys().(*syscall.Stat_t).Blocks * 512
		return nil
	})
	return u, err
}

// withStorage is p with a graph root and run root of its own under dir
// (a storage.conf there, as podman's --root and --runroot would give).
func (p *podman) withStorage(dir string) (*podman, error) {
	conf := filepath.Join(dir, "storage.conf")
	if err := os.WriteFile(conf, []byte(storageConfig(dir)), 0o644); err != nil {
		return nil, err
	}
	q := *p
	q.dir = dir
	q.env = append(append([]string{}, p.env...), "CONTAINERS_STORAGE_CONF="+conf) // the last one counts
	return &q, nil
}

// removeStorage removes everything in pm's storage through podman (which
// unmounts what it mounted), then its dir.
func removeStorage(pm *podman) error {
	_, err := pm.out(context.Background(), "system", "reset", "--force")
	return errors.Join(err, os.RemoveAll(pm.dir))
}

// dropKept removes the stores task ready ran on.
func (r *imager) dropKept() error {
	var err error
	if r.keptCache != "" {
		err = os.RemoveAll(r.keptCache)
	}
	if r.keptPM != nil {
		err = errors.Join(err, removeStorage(r.keptPM))
	}
	return err
}

// openEngine opens an engine on the kept msb cache (or an empty one
// when msb's import failed: the host base needs no cache).
func (r *imager) openEngine(ctx context.Context) (*engine.Engine, error) {
	cfg := r.cfg
	dir := r.keptCache
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp(r.o.Work, "msb-"); err != nil {
			return nil, err
		}
		r.keptCache = dir
	}
	cfg.Cache = engine.CacheConfig{Dir: dir}
	cfg.MemoryBudget, cfg.Logger = -1, r.o.Logger
	e, err := engine.Open(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("opening the engine: %w", err)
	}
	r.b.report.Machine.Mode, r.b.report.Machine.Cgroup = e.Mode(), "memory: "+e.Enforcement().Memory
	if self, err := os.Executable(); err == nil && sameFile(self, e.InitBinary()) {
		r.b.note(noteInfo, "msb's sandbox init is this benchmark's own executable (%s, no %s beside it): each sandbox starts its larger runtime, so msb's task ready is longer than with make build's binaries (a test binary as init doubled it on 2026-12-06)",
			self, sandbox.InitBinary)
	}
	return e, nil
}

// readyTrial makes a task of A (msb: a sandbox of the imported image;
// msb-host-base: a sandbox of the host's system dirs; podman: podman run
// of the pulled image), starts the shell it keeps, and times until its
// first command, true, has answered; then closes it, untimed.
func (r *imager) readyTrial(ctx context.Context, e *engine.Engine, m string, round, slot int) error {
	var create, answer time.Duration
	var err error
	switch m {
	case MethodPodman:
		create, answer, err = r.podmanReady(ctx)
	default:
		req := engine.SandboxRequest{Image: r.fx.a, Labels: map[string]string{"msb-bench": "images"}}
		if m == MethodMSBHostBase {
			req = engine.SandboxRequest{HostBase: true, Labels: req.Labels}
		}
		create, answer, err = msbReady(ctx, e, req)
	}
	if err != nil {
		return err
	}
	r.add("a", m, "create", round, slot, create.Seconds(), UnitSeconds)
	r.add("a", m, "answer", round, slot, answer.Seconds(), UnitSeconds)
	r.add("a", m, "ready", round, slot, (create + answer).Seconds(), UnitSeconds)
	return nil
}

// msbReady: create = the sandbox made and its session "main" opened (by
// the create, SandboxRequest.Session); answer = `true` run in that session.
func msbReady(ctx context.Context, e *engine.Engine, req engine.SandboxRequest) (create, answer time.Duration, err error) {
	t0 := time.Now()
	req.Session = "main"
	s, err := e.CreateSandbox(ctx, req)
	if err != nil {
		return 0, 0, err
	}
	defer func() { err = errors.Join(err, s.Close()) }()
	create = time.Since(t0)
	t1 := time.Now()
	if err := msbRun(ctx, s, "true"); err != nil {
		return 0, 0, err
	}
	return create, time.Since(t1), nil
}

// podmanReady: create = `podman run -d -i --network none A bash` returned
// and `podman exec -i ID bash` started; answer = `true` written to that
// shell and its status read back.
func (r *imager) podmanReady(ctx context.Context) (create, answer time.Duration, err error) {
	pm := r.keptPM
	name := containerName()
	t0 := time.Now()
	id, err := pm.out(ctx, "run", "--detach", "--interactive", "--network", "none", "--name", name, r.fx.a, "bash")
	if err != nil {
		pm.out(context.Background(), "rm", "--force", "--time", "0", name) // created but not started
		return 0, 0, err
	}
	t := &podmanTask{pm: pm, id: id}
	t.sh, err = startPipeShell(pm.command(context.Background(), "exec", "--interactive", id, "bash", "--noprofile", "--norc"))
	if err != nil {
		return 0, 0, errors.Join(err, t.close())
	}
	defer func() { err = errors.Join(err, t.close()) }()
	create = time.Since(t0)
	t1 := time.Now()
	if err := t.run(ctx, "true"); err != nil {
		return 0, 0, err
	}
	return create, time.Since(t1), nil
}
