package rootfs

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Transports: how a SOURCE given to Open says where an image is. The
// prefixes follow skopeo's and podman's spelling.
const (
	TransportOCI         = "oci"                // oci:DIR[:NAME], an OCI image layout directory
	TransportOCIArchive  = "oci-archive"        // oci-archive:FILE[:NAME], a tar of one
	TransportDocker      = "docker-archive"     // docker-archive:FILE[:REF], docker save / podman save
	TransportRegistry    = "docker"             // docker://REF, a distribution v2 registry
	TransportContainers  = "containers-storage" // containers-storage:REF, podman's local store
	TransportDockerLocal = "docker-daemon"      // docker-daemon:REF, docker's local store
)

// OpenOptions tune Open.
type OpenOptions struct {
	// Username and Password authenticate to a registry (basic, or the token
	// flow the registry asks for). Without them the credentials come from
	// AuthFile, else the docker/podman config files (registryKeychain),
	// else none.
	Username, Password string
	// AuthFile is a podman/docker auth file ({"auths": {...}}, podman's
	// --authfile and $REGISTRY_AUTH_FILE) that takes precedence over the
	// default config files.
	AuthFile string
	// Insecure allows plain HTTP, only to a registry on a loopback address.
	Insecure bool
	// TempDir holds what a transport must unpack or save first (an
	// oci-archive, an image saved from a local store); "" is os.TempDir.
	TempDir string
}

// Opened is an image read from a source, with the references the source
// gives it (a tag, the RepoTags of a docker-archive, an OCI layout's
// ref.name annotation). Close removes what Open unpacked.
type Opened struct {
	Image v1.Image
	Names []string
	close func()
}

// Close releases the temp files the source needed.
func (o *Opened) Close() {
	if o.close != nil {
		o.close()
		o.close = nil
	}
}

// Open reads an image from a source: TRANSPORT:WHERE (see the Transport
// constants), or a bare path (a directory is an OCI layout, a file an
// archive of either kind). Errors wrap ErrImage.
func Open(ctx context.Context, source string, opts OpenOptions) (*Opened, error) {
	o, err := open(ctx, source, opts)
	if err != nil {
		if errors.Is(err, ErrImage) {
			return nil, fmt.Errorf("%s: %w", source, err)
		}
		return nil, fmt.Errorf("%s: %w: %w", source, ErrImage, err)
	}
	return o, nil
}

func open(ctx context.Context, source string, opts OpenOptions) (*Opened, error) {
	if rest, ok := strings.CutPrefix(source, TransportRegistry+"://"); ok {
		return openRegistry(ctx, rest, opts)
	}
	transport, rest, ok := strings.Cut(source, ":")
	switch {
	case ok && transport == TransportOCI:
		dir, ref := splitPathRef(rest)
		return openLayout(dir, ref)
	case ok && transport == TransportOCIArchive:
		file, ref := splitPathRef(rest)
		return openOCIArchive(file, ref, opts)
	case ok && transport == TransportDocker:
		file, ref := splitPathRef(rest)
		return openDockerArchive(file, ref)
	case ok && transport == TransportContainers:
		return openLocal(ctx, "podman", rest, opts)
	case ok && transport == TransportDockerLocal:
		return openLocal(ctx, "docker", rest, opts)
	}
	fi, err := os.Stat(source)
	if err != nil {
		return nil, fmt.Errorf("%w: not a file or directory, and no transport prefix (oci:, oci-archive:, docker-archive:, docker://, containers-storage:, docker-daemon:)", ErrNoImage)
	}
	if fi.IsDir() {
		return openLayout(source, "")
	}
	if isOCIArchive(source) {
		return openOCIArchive(source, "", opts)
	}
	return openDockerArchive(source, "")
}

// splitPathRef splits PATH[:REF] at the first ":" before which a file or
// directory exists, so that both PATH and REF may hold colons
// (oci:./layout:example.com/app:1); without one, all of s is the path.
func splitPathRef(s string) (string, string) {
	if _, err := os.Stat(s); err == nil {
		return s, ""
	}
	for i := 0; i < len(s); i++ {
		if s[i] != ':' {
			continue
		}
		if _, err := os.Stat(s[:i]); err == nil {
			return s[:i], s[i+1:]
		}
	}
	return s, ""
}

// platform is the one an index is resolved to: this host's.
func platform() v1.Platform { return v1.Platform{OS: "linux", Architecture: runtime.GOARCH} }

func openRegistry(ctx context.Context, ref string, opts OpenOptions) (*Opened, error) {
	var nopts []name.Option
	if opts.Insecure {
		r, err := name.ParseReference(ref)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrImage, err)
		}
		if !loopback(r.Context().RegistryStr()) {
			return nil, fmt.Errorf("%w: plain HTTP is allowed only to a registry on a loopback address, not %s", ErrImage, r.Context().RegistryStr())
		}
		nopts = append(nopts, name.Insecure)
	}
	r, err := name.ParseReference(ref, nopts...)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrImage, err)
	}
	ropts := []remote.Option{remote.WithContext(ctx), remote.WithPlatform(platform()),
		remote.WithRetryBackoff(remote.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Steps: 2})}
	if opts.Username != "" || opts.Password != "" {
		ropts = append(ropts, remote.WithAuth(&authn.Basic{Username: opts.Username, Password: opts.Password}))
	} else {
		ropts = append(ropts, remote.WithAuthFromKeychain(registryKeychain(opts.AuthFile)))
	}
	img, err := remote.Image(r, ropts...)
	if err != nil {
		var te *transport.Error
		switch {
		case errors.As(err, &te) && te.StatusCode == http.StatusNotFound:
			return nil, fmt.Errorf("%w: %v", ErrNoImage, err)
		case errors.As(err, &te) && (te.StatusCode == http.StatusUnauthorized || te.StatusCode == http.StatusForbidden):
			return nil, fmt.Errorf("%w: %s refused access with %s: %v", ErrAuth, r.Context().RegistryStr(), authSource(opts), err)
		}
		return nil, fmt.Errorf("%w: %v", ErrImage, err)
	}
	names := []string{}
	if _, ok := r.(name.Tag); ok {
		names = append(names, r.String())
	}
	return &Opened{Image: img, Names: names}, nil
}

// loopback reports whether a registry host[:port] is a loopback address.
func loopback(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// refNameAnnotation names an image in an OCI layout's index.
const refNameAnnotation = "org.opencontainers.image.ref.name"

func openLayout(dir, ref string) (*Opened, error) {
	p, err := layout.FromPath(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: no OCI layout at %s: %v", ErrNoImage, dir, err)
		}
		return nil, fmt.Errorf("%w: OCI layout %s: %v", ErrImage, dir, err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		return nil, fmt.Errorf("%w: OCI layout %s: %v", ErrImage, dir, err)
	}
	img, refName, err := pickImage(idx, ref)
	if err != nil {
		return nil, fmt.Errorf("OCI layout %s: %w", dir, err)
	}
	o := &Opened{Image: img}
	if refName != "" {
		o.Names = append(o.Names, refName)
	}
	return o, nil
}

// pickImage chooses the image of an index: the one whose ref.name is ref
// (or the only one when ref is ""), resolving a nested index to this
// host's platform.
func pickImage(idx v1.ImageIndex, ref string) (v1.Image, string, error) {
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, "", fmt.Errorf("%w: %v", ErrImage, err)
	}
	var found []v1.Descriptor
	for _, d := range im.Manifests {
		if ref == "" || d.Annotations[refNameAnnotation] == ref {
			found = append(found, d)
		}
	}
	switch {
	case len(found) == 0 && ref != "":
		return nil, "", fmt.Errorf("%w: no image named %q", ErrNoImage, ref)
	case len(found) == 0:
		return nil, "", fmt.Errorf("%w: the index lists no image", ErrNoImage)
	case len(found) > 1:
		return nil, "", fmt.Errorf("%w: the index lists %d images; name one (oci:DIR:NAME)", ErrImage, len(found))
	}
	d := found[0]
	refName := d.Annotations[refNameAnnotation]
	switch {
	case d.MediaType.IsImage():
		img, err := idx.Image(d.Digest)
		if err != nil {
			return nil, "", fmt.Errorf("%w: %v", ErrImage, err)
		}
		return img, refName, nil
	case d.MediaType.IsIndex():
		child, err := idx.ImageIndex(d.Digest)
		if err != nil {
			return nil, "", fmt.Errorf("%w: %v", ErrImage, err)
		}
		img, err := forPlatform(child)
		return img, refName, err
	}
	return nil, "", fmt.Errorf("%w: media type %s", ErrUnsupported, d.MediaType)
}

// forPlatform picks this host's image of a multi-platform index.
func forPlatform(idx v1.ImageIndex) (v1.Image, error) {
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrImage, err)
	}
	want := platform()
	for _, d := range im.Manifests {
		if d.MediaType.IsImage() && d.Platform != nil && d.Platform.OS == want.OS && d.Platform.Architecture == want.Architecture {
			img, err := idx.Image(d.Digest)
			if err != nil {
				return nil, fmt.Errorf("%w: %v", ErrImage, err)
			}
			return img, nil
		}
	}
	return nil, fmt.Errorf("%w: no image for %s/%s in the index", ErrNoImage, want.OS, want.Architecture)
}

func openDockerArchive(file, ref string) (*Opened, error) {
	if _, err := os.Stat(file); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoImage, err)
	}
	var tag *name.Tag
	if ref != "" {
		t, err := name.NewTag(ref)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrImage, err)
		}
		tag = &t
	}
	img, err := tarball.ImageFromPath(file, tag)
	if err != nil {
		return nil, fmt.Errorf("%w: docker archive %s: %v", ErrImage, file, err)
	}
	o := &Opened{Image: img}
	if ref != "" {
		o.Names = append(o.Names, ref)
		return o, nil
	}
	m, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(file) })
	if err == nil && len(m) == 1 {
		o.Names = append(o.Names, m[0].RepoTags...)
	}
	return o, nil
}

// isOCIArchive reports whether a tar file holds an OCI layout (an
// oci-layout file) rather than a docker save.
func isOCIArchive(file string) bool {
	f, err := os.Open(file)
	if err != nil {
		return false
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err != nil {
			return false
		}
		if n, _ := cleanName(h.Name); n == "oci-layout" {
			return true
		}
	}
}

// openOCIArchive unpacks the layout's blobs into a temp dir (blobs, not
// layers: nothing of the image's file tree is extracted) and opens it.
func openOCIArchive(file, ref string, opts OpenOptions) (*Opened, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoImage, err)
	}
	defer f.Close()
	dir, err := os.MkdirTemp(opts.TempDir, "oci-archive-")
	if err != nil {
		return nil, err
	}
	cleanup := func() { os.RemoveAll(dir) }
	if err := unpackLayout(f, dir); err != nil {
		cleanup()
		return nil, fmt.Errorf("oci archive %s: %w", file, err)
	}
	o, err := openLayout(dir, ref)
	if err != nil {
		cleanup()
		return nil, err
	}
	o.close = cleanup
	return o, nil
}

// unpackLayout writes an OCI layout tar's files into dir; only the layout's
// own names (oci-layout, index.json, blobs/<alg>/<hex>) are accepted.
func unpackLayout(r io.Reader, dir string) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w: reading the archive: %v", ErrImage, err)
		}
		p, err := cleanName(h.Name)
		if err != nil {
			return err
		}
		segs := strings.Split(p, "/")
		switch {
		case h.Typeflag == tar.TypeDir && (p == "." || p == "blobs" || len(segs) == 2 && segs[0] == "blobs"):
			if err := os.MkdirAll(filepath.Join(dir, p), 0o755); err != nil {
				return err
			}
			continue
		case h.Typeflag != tar.TypeReg:
			return fmt.Errorf("%w: unexpected entry %q in an OCI archive", ErrImage, h.Name)
		case p == "oci-layout" || p == "index.json" || len(segs) == 3 && segs[0] == "blobs":
		default:
			return fmt.Errorf("%w: unexpected entry %q in an OCI archive", ErrImage, h.Name)
		}
		dst := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return err
		}
		_, err = io.Copy(out, tr)
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("%w: %s: %v", ErrImage, h.Name, err)
		}
	}
}

// openLocal saves an image from podman's or docker's store (with the tool's
// own save command) into a temp docker-archive and opens that.
func openLocal(ctx context.Context, tool, ref string, opts OpenOptions) (*Opened, error) {
	bin, err := exec.LookPath(tool)
	if err != nil {
		return nil, fmt.Errorf("%w: %s is not installed (%v)", ErrNoLocalStore, tool, err)
	}
	if out, err := exec.CommandContext(ctx, bin, "info").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("%w: %s info: %v: %s", ErrNoLocalStore, tool, err, strings.TrimSpace(string(out)))
	}
	dir, err := os.MkdirTemp(opts.TempDir, tool+"-save-")
	if err != nil {
		return nil, err
	}
	cleanup := func() { os.RemoveAll(dir) }
	file := filepath.Join(dir, "image.tar")
	if out, err := exec.CommandContext(ctx, bin, "save", "-o", file, ref).CombinedOutput(); err != nil {
		cleanup()
		return nil, fmt.Errorf("%w: %s save %s: %v: %s", ErrNoImage, tool, ref, err, strings.TrimSpace(string(out)))
	}
	o, err := openDockerArchive(file, "")
	if err != nil {
		cleanup()
		return nil, err
	}
	o.close = cleanup
	if len(o.Names) == 0 {
		o.Names = append(o.Names, ref)
	}
	return o, nil
}

// supportedLayer reports whether msb reads a layer media type.
func supportedLayer(mt types.MediaType) bool {
	switch mt {
	case types.DockerLayer, types.DockerUncompressedLayer, types.OCILayer, types.OCILayerZStd, types.OCIUncompressedLayer:
		return true
	}
	return false
}
