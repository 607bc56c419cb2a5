package bench

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// The images comparison's fixture: two images built here from Debian's
// packages, A (a base and the layers of ImagesOptions.A) and B (the same
// base and the layers of ImagesOptions.B), pushed to a registry
// (Debian's docker-registry) that the run starts on loopback and stops
// after. Everything lives in a temp dir under the work dir, removed at
// the end of the run.

// ImageLayer is what one layer of a fixture image holds: the files of
// Debian packages, as dpkg-deb -x extracts them (the files a package
// installs, no maintainer script run), or Files generated files of
// FileSize bytes each (pseudo-random base64 text, no two layers alike).
type ImageLayer struct {
	Packages []string `json:"packages,omitempty"`
	Files    int      `json:"files,omitempty"`
	FileSize int64    `json:"file_size,omitempty"`
}

func (l ImageLayer) String() string {
	if len(l.Packages) > 0 {
		return strings.Join(l.Packages, " ")
	}
	return fmt.Sprintf("%d generated files of %s", l.Files, fmtSize(l.FileSize))
}

// fixture is a run's two images in its registry.
type fixture struct {
	dir      string
	registry *registry
	a, b     string // references of A and B in the registry
	// bytes of the regular files of A (base included), of B's own layers,
	// and of those of B's own files whose content is in no layer of A,
	// each content once: what a store that keeps each content once must
	// add for B after A
	aBytes, bOwn, bUnique int64
}

// fixtureImage names the images built in the bench's podman storage
// (removed once pushed).
func fixtureImage(what string) string {
	return fmt.Sprintf("localhost/msb-bench-images/%s:%d", what, os.Getpid())
}

// makeFixture builds A and B and pushes them to a registry it starts.
func (r *imager) makeFixture(ctx context.Context) (f *fixture, err error) {
	dir, err := os.MkdirTemp(r.o.Work, "images-")
	if err != nil {
		return nil, err
	}
	f = &fixture{dir: dir}
	defer func() {
		if err != nil {
			f.close()
		}
	}()
	base := r.o.BaseRootfs
	if base == "" {
		base = filepath.Join(dir, "base")
		r.b.logf("images: mmdebstrap of the base (%s)", strings.Join(r.o.BasePackages, " "))
		if err := mmdebstrap(ctx, base, r.o.BasePackages); err != nil {
			return f, err
		}
	}
	layers := map[string][]string{"a": {base}, "b": {base}}
	for _, img := range []struct {
		name string
		ls   []ImageLayer
	}{{"a", r.o.A}, {"b", r.o.B}} {
		for i, l := range img.ls {
			d := filepath.Join(dir, fmt.Sprintf("%s%d", img.name, i+2))
			r.b.logf("images: layer %d of %s: %s", i+2, img.name, l)
			if err := fillLayer(ctx, d, l); err != nil {
				return f, fmt.Errorf("layer %d of %s: %w", i+2, img.name, err)
			}
			layers[img.name] = append(layers[img.name], d)
		}
	}
	if f.aBytes, f.bOwn, f.bUnique, err = uniqueBytes(ctx, layers["a"], layers["b"][1:]); err != nil {
		return f, err
	}
	if err := r.buildImages(ctx, filepath.Join(dir, "context"), layers); err != nil {
		return f, err
	}
	if f.registry, err = startRegistry(ctx, filepath.Join(dir, "registry")); err != nil {
		return f, err
	}
	f.a, f.b = f.registry.addr+"/msb-bench/a:1", f.registry.addr+"/msb-bench/b:1"
	for what, ref := range map[string]string{"a": f.a, "b": f.b} {
		r.b.logf("images: push of %s to %s", what, ref)
		if _, err := r.b.pm.out(ctx, "push", "--tls-verify=false", fixtureImage(what), ref); err != nil {
			return f, err
		}
	}
	return f, nil
}

// close stops the registry and removes the fixture's files.
func (f *fixture) close() error {
	if f.registry != nil {
		f.registry.stop()
	}
	return os.RemoveAll(f.dir)
}

// buildImages makes, in the bench's podman storage, the base image
// (podman import of the base's tar) and A and B from it, one ADD of a
// layer's tar per layer; removeImages removes them after the push.
func (r *imager) buildImages(ctx context.Context, dir string, layers map[string][]string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tars := map[string]string{}
	for _, ds := range layers {
		for _, d := range ds {
			if tars[d] != "" {
				continue
			}
			t := filepath.Join(dir, fmt.Sprintf("layer%d.tar", len(tars)))
			if out, err := exec.CommandContext(ctx, "tar", "-C", d, "--numeric-owner", "-cf", t, ".").CombinedOutput(); err != nil {
				return fmt.Errorf("tar of %s: %v: %s", d, err, tail(string(out), 400))
			}
			tars[d] = t
		}
	}
	base := layers["a"][0]
	if _, err := r.b.pm.out(ctx, "import", tars[base], fixtureImage("base")); err != nil {
		return err
	}
	for _, what := range []string{"a", "b"} {
		cf := "FROM " + fixtureImage("base") + "\n"
		for _, d := range layers[what][1:] {
			cf += "ADD " + filepath.Base(tars[d]) + " /\n"
		}
		cf += "CMD [\"bash\"]\n"
		r.b.logf("images: build of %s (%d layers)", what, len(layers[what]))
		if err := r.b.pm.build(ctx, fixtureImage(what), dir, cf, "images-"+what); err != nil {
			return err
		}
	}
	return nil
}

// removeImages removes the fixture's images from the bench's podman
// storage.
func (r *imager) removeImages() error {
	var err error
	for _, what := range []string{"a", "b", "base"} {
		if _, e := r.b.pm.out(context.Background(), "rmi", "--force", fixtureImage(what)); e != nil && err == nil {
			err = e
		}
	}
	return err
}

// mmdebstrap makes a minbase Debian root filesystem of the host's suite
// with packages in dir.
func mmdebstrap(ctx context.Context, dir string, packages []string) error {
	if _, err := exec.LookPath("mmdebstrap"); err != nil {
		return fmt.Errorf("%w: the images' base needs mmdebstrap (apt-get install mmdebstrap), or give a base root filesystem", errSkipped)
	}
	args := []string{"--variant=minbase", "--quiet"}
	if len(packages) > 0 {
		args = append(args, "--include="+strings.Join(packages, ","))
	}
	args = append(args, hostSuite(), dir, debianMirror)
	if out, err := exec.CommandContext(ctx, "mmdebstrap", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("mmdebstrap %s: %v: %s", strings.Join(args, " "), err, tail(string(out), 800))
	}
	return nil
}

// hostSuite is the host's Debian release, bookworm elsewhere.
func hostSuite() string {
	rel, err := os.ReadFile("/etc/os-release")
	if err != nil || !strings.Contains(string(rel), "ID=debian") {
		return "bookworm"
	}
	for _, l := range strings.Split(string(rel), "\n") {
		if v, ok := strings.CutPrefix(l, "VERSION_CODENAME="); ok && v != "" {
			return v
		}
	}
	return "bookworm"
}

// fillLayer makes dir hold what l says.
func fillLayer(ctx context.Context, dir string, l ImageLayer) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if len(l.Packages) > 0 {
		return extractPackages(ctx, dir, l.Packages)
	}
	return generateFiles(dir, l.Files, l.FileSize)
}

// extractPackages downloads packages (apt-get download, the host's
// package lists) and extracts their files into dir.
func extractPackages(ctx context.Context, dir string, packages []string) error {
	debs, err := os.MkdirTemp("", "msb-bench-debs-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(debs)
	os.Chmod(debs, 0o755) // apt's _apt user writes here when it can
	cmd := exec.CommandContext(ctx, "apt-get", append([]string{"download", "--quiet"}, packages...)...)
	cmd.Dir = debs
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("apt-get download %s: %v: %s", strings.Join(packages, " "), err, tail(string(out), 600))
	}
	files, err := filepath.Glob(filepath.Join(debs, "*.deb"))
	if err != nil {
		return err
	}
	for _, deb := range files {
		if out, err := exec.CommandContext(ctx, "dpkg-deb", "-x", deb, dir).CombinedOutput(); err != nil {
			return fmt.Errorf("dpkg-deb -x %s: %v: %s", filepath.Base(deb), err, tail(string(out), 400))
		}
	}
	return nil
}

// generateFiles writes n files of size bytes of pseudo-random base64
// text under dir/opt/generated-<dir's name>, 100 per directory, seeded
// by the dir's name: no two layers alike.
func generateFiles(dir string, n int, size int64) error {
	name := filepath.Base(dir)
	var seed [32]byte
	copy(seed[:], name)
	rng := rand.NewChaCha8(seed)
	raw := make([]byte, base64.StdEncoding.DecodedLen(int(size))+3)
	for i := range n {
		d := filepath.Join(dir, "opt", "generated-"+name, fmt.Sprintf("d%03d", i/100))
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		rng.Read(raw)
		text := []byte(base64.StdEncoding.EncodeToString(raw))[:size]
		if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("f%05d", i)), text, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// uniqueBytes sums the regular files of aDirs (A's layers), of bDirs
// (B's own layers), and of B's files whose content is in no layer of A,
// each content once.
func uniqueBytes(ctx context.Context, aDirs, bDirs []string) (aBytes, bOwn, bUnique int64, err error) {
	inA := map[[32]byte]bool{}
	err = walkInodes(ctx, aDirs, func(p string, fi fs.FileInfo) error {
		if !fi.Mode().IsRegular() {
			return nil
		}
		aBytes += fi.Size()
		h, err := fileHash(p)
		inA[h] = true
		return err
	})
	if err != nil {
		return 0, 0, 0, err
	}
	seen := map[[32]byte]bool{}
	err = walkInodes(ctx, bDirs, func(p string, fi fs.FileInfo) error {
		if !fi.Mode().IsRegular() {
			return nil
		}
		bOwn += fi.Size()
		h, err := fileHash(p)
		if !inA[h] && !seen[h] {
			bUnique += fi.Size()
		}
		seen[h] = true
		return err
	})
	return aBytes, bOwn, bUnique, err
}

func fileHash(p string) ([32]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return [32]byte{}, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return [32]byte{}, fmt.Errorf("hashing %s: %w", p, err)
	}
	return [32]byte(h.Sum(nil)), nil
}

// registry is Debian's docker-registry serving a temp dir on a free
// loopback port.
type registry struct {
	addr string
	cmd  *exec.Cmd
}

// startRegistry starts docker-registry with its storage and configuration
// in dir, and waits until it answers.
func startRegistry(ctx context.Context, dir string) (*registry, error) {
	bin, err := exec.LookPath("docker-registry")
	if err != nil {
		return nil, fmt.Errorf("%w: docker-registry is not installed (apt-get install docker-registry)", errSkipped)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	l.Close()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	cfg := filepath.Join(dir, "config.yml")
	conf := fmt.Sprintf("version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: %s\nhttp:\n  addr: %s\n", filepath.Join(dir, "data"), addr)
	if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	cmd := exec.Command(bin, "serve", cfg)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	r := &registry{addr: addr, cmd: cmd}
	for i := 0; ; i++ {
		resp, err := http.Get("http://" + addr + "/v2/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return r, nil
			}
		}
		if i == 200 || ctx.Err() != nil {
			r.stop()
			return nil, fmt.Errorf("docker-registry on %s did not answer: %v: %s", addr, err, tail(out.String(), 400))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (r *registry) stop() {
	r.cmd.Process.Kill()
	r.cmd.Wait()
}
