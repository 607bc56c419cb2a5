package rootfs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/minisandbox/msb/internal/store"
)

// A Debian base is a root filesystem msb builds from Debian's packages with
// Debian's own mmdebstrap: one store layer holding mmdebstrap's tar (files
// deduplicated against the whole store, as an image layer's are) and a
// record layer above it in the image record's format, so a base is used
// wherever an image is (rootfs.Image, msb run --image/--base, --base of
// environment builds). Refs: base/debian/<suite>/<key>, where the key
// hashes the inputs (DebianSpec), and base/debian/<name> for a name given at
// build time.

// DebianRefPrefix starts every Debian base's ref.
const DebianRefPrefix = "base/debian/"

// Default inputs of a Debian base.
const (
	DefaultDebianMirror   = "http://deb.debian.org/debian"
	DefaultSnapshotMirror = "http://snapshot.debian.org/archive/debian"
	DefaultDebianVariant  = "minbase"
)

// debianPath is the PATH a Debian base's sandboxes get (Debian's
// /etc/profile value for root).
const debianPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

var (
	// ErrDebianSpec: the inputs of a Debian base are malformed.
	ErrDebianSpec = errors.New("bad debian base")
	// ErrDebianMirror: the mirror cannot serve the suite (at the date).
	ErrDebianMirror = errors.New("debian mirror unavailable")
	// ErrNoMmdebstrap: mmdebstrap is not installed.
	ErrNoMmdebstrap = errors.New("mmdebstrap not found (apt-get install mmdebstrap)")
)

// The patterns are compiled on first use: msb run, which never checks a
// Debian spec, does not pay for them at start-up.
var (
	suiteRE   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z][a-z0-9-]{0,31}$`) })
	packageRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]{0,99}(:[a-z0-9-]+)?$`) })
	dateRE    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9]{8}T[0-9]{6}Z$`) })
	nameRE    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`) })
)

// DebianSpec is what a Debian base is built from; its Key hashes it.
type DebianSpec struct {
	Suite string `json:"suite"`
	// Variant is mmdebstrap's: minbase (essential packages and apt) or
	// essential (no apt).
	Variant string `json:"variant"`
	// Packages are installed on top of the variant's, sorted and unique.
	Packages []string `json:"packages,omitempty"`
	// Date is a snapshot.debian.org index date (YYYYMMDDTHHMMSSZ): the
	// packages are those the mirror's <Mirror>/<Date>/ tree holds.
	Date string `json:"date,omitempty"`
	// Mirror is the archive's URL (with Date: the snapshot archive's root).
	Mirror string `json:"mirror"`
}

// Normalize fills the defaults, sorts the packages and checks every field;
// errors wrap ErrDebianSpec.
func (d DebianSpec) Normalize() (DebianSpec, error) {
	if !suiteRE().MatchString(d.Suite) {
		return d, fmt.Errorf("%w: suite %q (want a name such as bookworm)", ErrDebianSpec, d.Suite)
	}
	if d.Variant == "" {
		d.Variant = DefaultDebianVariant
	}
	if d.Variant != "minbase" && d.Variant != "essential" {
		return d, fmt.Errorf("%w: variant %q (want minbase or essential)", ErrDebianSpec, d.Variant)
	}
	pkgs := make([]string, 0, len(d.Packages))
	for _, p := range d.Packages {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		if !packageRE().MatchString(p) {
			return d, fmt.Errorf("%w: package name %q", ErrDebianSpec, p)
		}
		pkgs = append(pkgs, p)
	}
	slices.Sort(pkgs)
	d.Packages = slices.Compact(pkgs)
	if len(d.Packages) == 0 {
		d.Packages = nil
	}
	if d.Date != "" && !dateRE().MatchString(d.Date) {
		return d, fmt.Errorf("%w: date %q (want YYYYMMDDTHHMMSSZ, as snapshot.debian.org names its indexes)", ErrDebianSpec, d.Date)
	}
	if d.Mirror == "" {
		d.Mirror = DefaultDebianMirror
		if d.Date != "" {
			d.Mirror = DefaultSnapshotMirror
		}
	}
	d.Mirror = strings.TrimRight(d.Mirror, "/")
	if !strings.HasPrefix(d.Mirror, "http://") && !strings.HasPrefix(d.Mirror, "https://") {
		return d, fmt.Errorf("%w: mirror %q (want an http:// or https:// URL)", ErrDebianSpec, d.Mirror)
	}
	return d, nil
}

// Key is the hash of the normalized inputs: the same inputs give the same
// key. Call it on a normalized spec.
func (d DebianSpec) Key() string {
	b, _ := json.Marshal(d) // fields in a fixed order; cannot fail
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:16]
}

// Ref is the base's key ref, base/debian/<suite>/<key>.
func (d DebianSpec) Ref() string { return DebianRefPrefix + d.Suite + "/" + d.Key() }

// archiveURL is where apt reads the packages: the mirror, or with a date
// the mirror's tree for that date.
func (d DebianSpec) archiveURL() string {
	if d.Date == "" {
		return d.Mirror
	}
	return d.Mirror + "/" + d.Date
}

// DebianNameRef is the ref of a base's friendly name, base/debian/<name>.
func DebianNameRef(name string) (string, error) {
	if !nameRE().MatchString(name) {
		return "", fmt.Errorf("%w: name %q (letters, digits, '.', '_', '-')", ErrDebianSpec, name)
	}
	return DebianRefPrefix + name, nil
}

// DebianRecord is a Debian base's record: an image record (so Image.Root
// reads it) with the inputs it was built from.
type DebianRecord struct {
	Record
	Debian DebianSpec `json:"debian"`
	Key    string     `json:"key"`
	// BuildSeconds is how long mmdebstrap and the import took.
	BuildSeconds float64 `json:"build_seconds"`
}

// DebianBuildOptions tune BuildDebian.
type DebianBuildOptions struct {
	// Name, when set, is recorded as base/debian/<Name> too.
	Name string
	// TempDir holds mmdebstrap's tar while it is imported (default: the
	// system's).
	TempDir string
	// Log gets mmdebstrap's output and what the store does not keep.
	Log *slog.Logger
}

// DebianBuild is what BuildDebian did.
type DebianBuild struct {
	Record *DebianRecord
	// Ref is the key ref; Refs every ref set (with the name's).
	Ref  string
	Refs []string
	// Hit: the store already held a base of these inputs.
	Hit bool
}

// Debian is a Debian base msb built, named as a user would: debian/<suite>/<key>,
// debian/<name> or the full base/debian/... ref.
type Debian struct{ Name string }

// Root returns the base's layer and its config.
func (d Debian) Root(ctx context.Context, st *store.Store) (Root, error) {
	return Image{Ref: debianRef(d.Name)}.Root(ctx, st)
}

func (d Debian) String() string { return debianRef(d.Name) }

// debianRef spells a user's name of a base as its ref.
func debianRef(s string) string {
	if strings.HasPrefix(s, DebianRefPrefix) {
		return s
	}
	return "base/" + s
}

// isDebianName reports whether s names a Debian base rather than an image.
func isDebianName(s string) bool {
	return strings.HasPrefix(s, "debian/") || strings.HasPrefix(s, DebianRefPrefix)
}

// BuildDebian builds the base spec names (mmdebstrap into a tar, the tar
// into one store layer, then the record layer and the refs), or finds it
// in the store (Hit). mmdebstrap runs in its root mode as root and in its
// unshare mode otherwise (the caller's subordinate ids, through
// newuidmap/newgidmap); the tar's owners are kept in the manifest, as an
// image import keeps them. Errors wrap ErrDebianSpec, ErrDebianMirror or
// ErrNoMmdebstrap where those apply.
func BuildDebian(ctx context.Context, st *store.Store, spec DebianSpec, opts DebianBuildOptions) (*DebianBuild, error) {
	spec, err := spec.Normalize()
	if err != nil {
		return nil, err
	}
	refs := []string{spec.Ref()}
	if opts.Name != "" {
		r, err := DebianNameRef(opts.Name)
		if err != nil {
			return nil, err
		}
		refs = append(refs, r)
	}
	if rec, err := ReadDebianRecord(ctx, st, spec.Ref()); err == nil {
		return finishHit(ctx, st, rec, refs)
	}
	if err := probeRelease(ctx, spec.archiveURL()+"/dists/"+spec.Suite+"/Release"); err != nil {
		return nil, fmt.Errorf("%w: %s cannot serve %s%s: %w", ErrDebianMirror, spec.archiveURL(), spec.Suite, atDate(spec.Date), err)
	}
	start := time.Now()
	tarPath, cleanup, err := mmdebstrap(ctx, spec, opts)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	rec := &DebianRecord{Record: Record{Version: RecordVersion, MediaType: "debian", Platform: "linux/" + debArch(),
		Config: Config{Env: []string{debianPath}}}, Debian: spec, Key: spec.Key()}
	rec.Digest = "debian:" + rec.Key
	w, err := st.NewLayerWriter(ctx)
	if err != nil {
		return nil, err
	}
	defer w.Close()
	id, err := importTarFile(ctx, w, tarPath, opts.Log)
	if err != nil {
		return nil, fmt.Errorf("importing mmdebstrap's tar: %w", err)
	}
	rec.Layers = []store.LayerID{id}
	rec.BuildSeconds = time.Since(start).Round(time.Millisecond).Seconds()
	recID, err := writeRecordFile(ctx, w, rec, id)
	if err != nil {
		return nil, fmt.Errorf("writing the debian base record: %w", err)
	}
	for _, r := range refs {
		if err := w.SetRef(r, recID); err != nil {
			return nil, err
		}
	}
	return &DebianBuild{Record: rec, Ref: refs[0], Refs: refs}, nil
}

// finishHit records the name of a base the store already has.
func finishHit(ctx context.Context, st *store.Store, rec *DebianRecord, refs []string) (*DebianBuild, error) {
	id, err := st.Ref(refs[0])
	if err != nil {
		return nil, err
	}
	for _, r := range refs[1:] {
		if err := st.SetRef(ctx, r, id); err != nil {
			return nil, err
		}
	}
	return &DebianBuild{Record: rec, Ref: refs[0], Refs: refs, Hit: true}, nil
}

func atDate(date string) string {
	if date == "" {
		return ""
	}
	return " at " + date
}

// probeRelease checks (HEAD) that url, a suite's Release file, is there, so
// that a mirror or date apt cannot use fails in one line rather than deep
// in mmdebstrap's output.
func probeRelease(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HEAD %s: %s", url, resp.Status)
	}
	return nil
}

// mmdebstrap runs mmdebstrap into a temp tar and returns its path.
func mmdebstrap(ctx context.Context, spec DebianSpec, opts DebianBuildOptions) (string, func(), error) {
	bin, err := exec.LookPath("mmdebstrap")
	if err != nil {
		return "", nil, ErrNoMmdebstrap
	}
	dir, err := os.MkdirTemp(opts.TempDir, "debian-base-")
	if err != nil {
		return "", nil, err
	}
	cleanup := func() { os.RemoveAll(dir) }
	out := dir + "/rootfs.tar"
	cmd := exec.CommandContext(ctx, bin, mmdebstrapArgs(spec, out)...)
	cmd.Dir = dir
	if mode() == "root" {
		// In unshare mode the namespace's root, a subordinate id, must
		// reach the chroot dir: it stays under the caller's TMPDIR (/tmp),
		// not in a cache dir under a 0700 home.
		cmd.Env = append(os.Environ(), "TMPDIR="+dir)
	}
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Run(); err != nil {
		cleanup()
		return "", nil, fmt.Errorf("mmdebstrap %s (%s): %w: %s", spec.Suite, mode(), err, lastLines(log.String(), 8))
	}
	if opts.Log != nil {
		opts.Log.Debug("mmdebstrap", "output", log.String())
	}
	return out, cleanup, nil
}

// mmdebstrapArgs are mmdebstrap's arguments for spec, writing a tar to out.
func mmdebstrapArgs(spec DebianSpec, out string) []string {
	args := []string{"--quiet", "--mode=" + mode(), "--variant=" + spec.Variant, "--format=tar"}
	if len(spec.Packages) > 0 {
		args = append(args, "--include="+strings.Join(spec.Packages, ","))
	}
	if spec.Date != "" {
		// A snapshot's Release files are past their Valid-Until.
		args = append(args, "--aptopt=Acquire::Check-Valid-Until \"false\"")
	}
	return append(args, spec.Suite, out, spec.archiveURL())
}

// mode is mmdebstrap's mode: root as root, unshare (user namespaces)
// otherwise.
func mode() string {
	if os.Geteuid() == 0 {
		return "root"
	}
	return "unshare"
}

// debArch is Debian's name of the host's architecture.
func debArch() string {
	out, err := exec.Command("dpkg", "--print-architecture").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// importTarFile stores a root filesystem tar as one layer with no parent.
func importTarFile(ctx context.Context, w *store.LayerWriter, path string, log *slog.Logger) (store.LayerID, error) {
	f, err := os.Open(path)
	if err != nil {
		return store.LayerID{}, err
	}
	defer f.Close()
	entries, notes, err := readLayer(ctx, w, view{}, f)
	if err != nil {
		return store.LayerID{}, err
	}
	if log != nil {
		notes.log(log, 1)
	}
	return w.Commit(ctx, &store.Manifest{Version: store.ManifestVersion, Entries: entries})
}

// ReadDebianRecord reads the record of the base a ref names.
func ReadDebianRecord(ctx context.Context, st *store.Store, ref string) (*DebianRecord, error) {
	rec, err := ReadRecord(ctx, st, ref)
	if err != nil {
		return nil, err
	}
	id, err := st.Ref(ref)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(st.TreePath(id) + "/" + recordFile)
	if err != nil {
		return nil, err
	}
	var d DebianRecord
	if err := json.Unmarshal(b, &d); err != nil || d.Key == "" {
		return nil, fmt.Errorf("%w: %s is not a debian base record", ErrNoImage, ref)
	}
	d.Record = *rec
	return &d, nil
}

// DebianBaseInfo is one base in DebianBases.
type DebianBaseInfo struct {
	Record *DebianRecord
	// Refs name the base (its key ref first); Layer is its rootfs layer.
	Refs  []string
	Layer store.LayerID
}

// DebianBases lists the Debian bases the store holds, by key ref.
func DebianBases(ctx context.Context, st *store.Store) ([]DebianBaseInfo, error) {
	refs, err := st.Refs()
	if err != nil {
		return nil, err
	}
	byRecord := map[store.LayerID]int{}
	var out []DebianBaseInfo
	for _, r := range refs {
		if !strings.HasPrefix(r.Name, DebianRefPrefix) {
			continue
		}
		if i, ok := byRecord[r.Layer]; ok {
			out[i].Refs = append(out[i].Refs, r.Name)
			continue
		}
		rec, err := ReadDebianRecord(ctx, st, r.Name)
		if err != nil {
			return nil, err
		}
		byRecord[r.Layer] = len(out)
		out = append(out, DebianBaseInfo{Record: rec, Refs: []string{r.Name}, Layer: rec.Layers[0]})
	}
	for i := range out {
		key := out[i].Record.Debian.Ref()
		slices.SortStableFunc(out[i].Refs, func(a, b string) int {
			if a == key {
				return -1
			}
			if b == key {
				return 1
			}
			return strings.Compare(a, b)
		})
	}
	return out, nil
}
