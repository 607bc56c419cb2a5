package rootfs

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/minisandbox/msb/internal/privtest"
	"github.com/minisandbox/msb/internal/store"
)

// baseLayer and topLayer make a two-layer image whose top deletes a file,
// makes a directory opaque and adds files, links and a device node.
func baseLayer() []ent {
	suid := file("usr/bin/tool", "#!/bin/sh\necho tool\n")
	suid.Mode, suid.UID, suid.GID = 0o4755, 0, 0
	owned := file("home/app/data", "app's\n")
	owned.UID, owned.GID = 1000, 1000
	return []ent{dir("etc"), file("etc/keep", "keep\n"), file("etc/gone", "gone\n"),
		dir("opaque"), dir("opaque/old"), file("opaque/old/f", "old\n"), file("opaque/also", "old\n"),
		dir("usr"), dir("usr/bin"), suid, dir("home"), dir("home/app"), owned}
}

func topLayer() []ent {
	hl := ent{Name: "usr/bin/tool2", Type: tar.TypeLink, Link: "usr/bin/tool"}
	dev := ent{Name: "dev/null", Type: tar.TypeChar, Mode: 0o666}
	capFile := file("usr/bin/ping", "ping\n")
	capFile.Xattrs = map[string]string{"security.capability": string(capNetBindService)}
	return []ent{dir("etc"), file("etc/.wh.gone", ""), dir("opaque"), file("opaque/.wh..wh..opq", ""),
		file("opaque/new", "new\n"), symlink("etc/link", "/etc/keep"), hl, dir("dev"), dev, capFile,
		file("./etc/keep", "kept and changed\n")}
}

// TestImportLayoutWhiteouts: an OCI layout's two layers become two store
// layers whose merged view honours the whiteout and the opaque directory,
// keeps modes, owners, symlinks and hard links, skips the device node, and
// carries the image's Env and WorkingDir.
func TestImportLayoutWhiteouts(t *testing.T) {
	st := openStore(t)
	img := buildImage(t, v1.Config{Env: []string{"PATH=/usr/bin:/bin", "GREETING=hi"}, WorkingDir: "/home/app", User: "1000"},
		baseLayer(), topLayer())
	src := "oci:" + writeLayout(t, img, "example.com/test/img:v1")
	imp, err := importSource(t, st, src, OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(imp.Record.Layers) != 2 {
		t.Fatalf("layers: %v", imp.Record.Layers)
	}
	wantRefs := []string{DigestRef(imp.Record.Digest), "image/example.com/test/img:v1"}
	if got := imageRefs(t, st); !slices.Equal(got, []string{wantRefs[1], wantRefs[0]}) && !slices.Equal(got, wantRefs) {
		t.Fatalf("refs %v, want %v", got, wantRefs)
	}
	ref, err := ImageRef(st, "example.com/test/img:v1")
	if err != nil {
		t.Fatal(err)
	}
	root, rt := merged(t, st, ref)
	if rt.Config.WorkingDir != "/home/app" || !slices.Contains(rt.Config.Env, "GREETING=hi") || rt.Config.User != "1000" {
		t.Fatalf("config %+v", rt.Config)
	}
	for _, gone := range []string{"etc/gone", "opaque/old", "opaque/also", "dev/null"} {
		if _, err := os.Lstat(filepath.Join(root, gone)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: want absent, got %v", gone, err)
		}
	}
	for p, want := range map[string]string{"etc/keep": "kept and changed\n", "opaque/new": "new\n", "usr/bin/tool2": "#!/bin/sh\necho tool\n"} {
		if b, err := os.ReadFile(filepath.Join(root, p)); err != nil || string(b) != want {
			t.Errorf("%s: %q, %v; want %q", p, b, err, want)
		}
	}
	if tgt, err := os.Readlink(filepath.Join(root, "etc/link")); err != nil || tgt != "/etc/keep" {
		t.Errorf("etc/link -> %q, %v", tgt, err)
	}
	// Modes and owners are the tar's, in the manifest (a rootless store
	// materializes every file as its caller).
	m, err := st.Manifest(imp.Record.Layers[0])
	if err != nil {
		t.Fatal(err)
	}
	byPath := map[string]store.Entry{}
	for _, e := range m.Entries {
		byPath[e.Path] = e
	}
	if e := byPath["usr/bin/tool"]; e.Mode != 0o4755 {
		t.Errorf("usr/bin/tool mode %#o, want 04755", e.Mode)
	}
	if e := byPath["home/app/data"]; e.UID != 1000 || e.GID != 1000 {
		t.Errorf("home/app/data owner %d:%d, want 1000:1000", e.UID, e.GID)
	}
	if !st.Rootless() {
		fi, err := os.Stat(filepath.Join(root, "usr/bin/tool"))
		if err != nil || fi.Mode()&os.ModeSetuid == 0 {
			t.Errorf("usr/bin/tool: %v, %v: want setuid", fi.Mode(), err)
		}
	}
	mustVerify(t, st)
}

// TestImportArchives: docker-archive and oci-archive files (what docker,
// podman and skopeo save) import to the same image as its layout dir, named
// by the archive's tag, and the bare path is recognised too.
func TestImportArchives(t *testing.T) {
	img := buildImage(t, v1.Config{Env: []string{"A=1"}}, baseLayer())
	layoutDir := writeLayout(t, img, "")
	for _, tc := range []struct {
		name, source, wantName string
	}{
		{"docker-archive", "docker-archive:" + writeDockerArchive(t, img, "example.com/a/b:c"), "image/example.com/a/b:c"},
		{"bare-docker-archive", writeDockerArchive(t, img, "example.com/a/b:d"), "image/example.com/a/b:d"},
		{"oci-archive", "oci-archive:" + tarDir(t, layoutDir), ""},
		{"bare-oci-archive", tarDir(t, layoutDir), ""},
		{"bare-layout", layoutDir, ""},
		{"layout-by-name", "oci:" + writeLayout(t, img, "example.com/a/b:named") + ":example.com/a/b:named", "image/example.com/a/b:named"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := openStore(t)
			imp, err := importSource(t, st, tc.source, OpenOptions{})
			if err != nil {
				t.Fatal(err)
			}
			refs := imageRefs(t, st)
			if tc.wantName != "" && !slices.Contains(refs, tc.wantName) {
				t.Fatalf("refs %v lack %s", refs, tc.wantName)
			}
			if !slices.Contains(refs, DigestRef(imp.Record.Digest)) {
				t.Fatalf("refs %v lack the digest ref", refs)
			}
			root, _ := merged(t, st, DigestRef(imp.Record.Digest))
			if b, err := os.ReadFile(filepath.Join(root, "etc/gone")); err != nil || string(b) != "gone\n" {
				t.Fatalf("etc/gone: %q %v", b, err)
			}
			mustVerify(t, st)
		})
	}
}

// TestImportSharedBase: a second image on the same base layer reuses that
// layer, and the store grows by about its new file only.
func TestImportSharedBase(t *testing.T) {
	st := openStore(t)
	big := make([]byte, 4<<20)
	rand.Read(big)
	unique := make([]byte, 1<<20)
	rand.Read(unique)
	base := append(baseLayer(), file("opt/big", string(big)))
	a := buildImage(t, v1.Config{}, base, []ent{file("a.txt", "a\n")})
	b := buildImage(t, v1.Config{}, base, []ent{file("b.bin", string(unique))})
	impA, err := importSource(t, st, "oci:"+writeLayout(t, a, "x/a:1"), OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u1, err := st.Usage(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	impB, err := importSource(t, st, "oci:"+writeLayout(t, b, "x/b:1"), OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u2, err := st.Usage(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if impA.Record.Layers[0] != impB.Record.Layers[0] {
		t.Fatalf("base layers differ: %s vs %s", impA.Record.Layers[0], impB.Record.Layers[0])
	}
	added := u2.DiskBytes - u1.DiskBytes
	// 1.1 x the new file, plus the directory blocks, manifests and record
	// of two small layers.
	if limit := int64(len(unique))*11/10 + 256<<10; added > limit {
		t.Fatalf("second image added %d bytes; want <= %d (unique file %d)", added, limit, len(unique))
	}
	mustVerify(t, st)
}

// TestImportRefusesHostileLayers: paths that leave the root and writes
// through a symlink (in one layer, or a symlink a lower layer made) are
// refused, with no ref left and a store that verifies.
func TestImportRefusesHostileLayers(t *testing.T) {
	for _, tc := range []struct {
		name   string
		layers [][]ent
	}{
		{"absolute", [][]ent{{file("/etc/passwd", "x")}}},
		{"dotdot", [][]ent{{dir("a"), file("a/../../escape", "x")}}},
		{"whiteout-dotdot", [][]ent{{file("a/../../.wh.x", "")}}},
		{"hardlink-dotdot", [][]ent{{{Name: "l", Type: tar.TypeLink, Link: "../../etc/shadow"}}}},
		{"symlink-then-write", [][]ent{{symlink("etc", "/proc/self/root/etc"), file("etc/passwd", "x")}}},
		{"lower-symlink-then-write", [][]ent{{symlink("etc", "/host/etc")}, {file("etc/passwd", "x")}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := openStore(t)
			img := buildImage(t, v1.Config{}, tc.layers...)
			_, err := importSource(t, st, "oci:"+writeLayout(t, img, "x/bad:1"), OpenOptions{})
			if !errors.Is(err, ErrHostileLayer) || !errors.Is(err, ErrImage) {
				t.Fatalf("err = %v, want ErrHostileLayer", err)
			}
			if refs := imageRefs(t, st); len(refs) != 0 {
				t.Fatalf("refs left: %v", refs)
			}
			mustVerify(t, st)
		})
	}
}

// TestImportBadInput: a missing image, a truncated archive, a blob that
// does not match its digest and an unreachable registry each fail with
// ErrImage and leave no ref behind.
func TestImportBadInput(t *testing.T) {
	img := buildImage(t, v1.Config{}, baseLayer(), topLayer())
	archive := writeDockerArchive(t, img, "x/y:z")
	full, err := os.ReadFile(archive)
	if err != nil {
		t.Fatal(err)
	}
	truncated := filepath.Join(t.TempDir(), "truncated.tar")
	if err := os.WriteFile(truncated, full[:len(full)*2/3], 0o644); err != nil {
		t.Fatal(err)
	}
	corrupt := writeLayout(t, img, "")
	editBlob(t, corrupt, img, func(b []byte) []byte { b[len(b)/2] ^= 0xff; return b })
	big := make([]byte, 1<<20)
	rand.Read(big)
	bigImg := buildImage(t, v1.Config{}, []ent{file("big", string(big))})
	cut := writeLayout(t, bigImg, "")
	odd, err := mutate.Append(empty.Image, mutate.Addendum{Layer: layerOf(t, baseLayer()), MediaType: "application/vnd.example.layer.v1+squashfs"})
	if err != nil {
		t.Fatal(err)
	}
	editBlob(t, cut, bigImg, func(b []byte) []byte { return b[:len(b)/2] })
	for _, tc := range []struct {
		name, source string
		opts         OpenOptions
		also         error
	}{
		{"missing-dir", "oci:" + filepath.Join(t.TempDir(), "nothing"), OpenOptions{}, ErrNoImage},
		{"missing-name", "oci:" + writeLayout(t, img, "x/y:1") + ":x/y:2", OpenOptions{}, ErrNoImage},
		{"missing-file", "docker-archive:/nonexistent/image.tar", OpenOptions{}, ErrNoImage},
		{"truncated", "docker-archive:" + truncated, OpenOptions{}, nil},
		{"wrong-digest", "oci:" + corrupt, OpenOptions{}, nil},
		{"truncated-layer", "oci:" + cut, OpenOptions{}, nil},
		{"unsupported-media-type", "oci:" + writeLayout(t, odd, ""), OpenOptions{}, ErrUnsupported},
		{"unreachable-registry", "docker://127.0.0.1:1/x/y:z", OpenOptions{Insecure: true}, nil},
		{"insecure-remote", "docker://registry.example.com/x/y:z", OpenOptions{Insecure: true}, nil},
		{"no-transport", "nosuch:thing", OpenOptions{}, ErrNoImage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := openStore(t)
			_, err := importSource(t, st, tc.source, tc.opts)
			if !errors.Is(err, ErrImage) || tc.also != nil && !errors.Is(err, tc.also) {
				t.Fatalf("err = %v, want ErrImage (and %v)", err, tc.also)
			}
			if strings.Count(err.Error(), "\n") > 0 {
				t.Errorf("error spans lines: %q", err)
			}
			if refs := imageRefs(t, st); len(refs) != 0 {
				t.Fatalf("refs left: %v", refs)
			}
			mustVerify(t, st)
		})
	}
}

// editBlob rewrites the image's last layer blob in a layout dir.
func editBlob(t testing.TB, layoutDir string, img v1.Image, edit func([]byte) []byte) {
	t.Helper()
	ls, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	d, err := ls[len(ls)-1].Digest()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(layoutDir, "blobs", d.Algorithm, d.Hex)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, edit(bytes.Clone(b)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestImportRootless reruns the import tests as an unprivileged user, whose
// store records the tar's owners and materializes files as the caller.
func TestImportRootless(t *testing.T) {
	privtest.Unprivileged(t, "^TestImport(Xattrs|LayoutWhiteouts|Archives|SharedBase|RefusesHostileLayers|BadInput|Registry|RegistryAuth)$")
}
