package rootfs

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"golang.org/x/sys/unix"

	"github.com/minisandbox/msb/internal/store"
)

// capNetBindService is what `setcap cap_net_bind_service=+ep FILE` writes:
// a revision 2 security.capability with the effective flag and bit 10
// permitted.
var capNetBindService = []byte{0x01, 0x00, 0x00, 0x02, 0x00, 0x04, 0x00, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}

// xattrLayers: a base whose ping has a file capability and user.* and
// trusted.* attributes (and a hard link to it), a directory with one, and
// attributes a runtime drops (SELinux label, overlay marker, a capability
// of the wrong size); a top layer that implies the directory.
func xattrLayers() ([]ent, []ent) {
	bin := dir("usr/bin")
	bin.Xattrs = map[string]string{"user.dirmark": "d"}
	ping := file("usr/bin/ping", "ping\n")
	ping.Mode = 0o755
	ping.Xattrs = map[string]string{"security.capability": string(capNetBindService), "user.mime": "application/x-ping", "trusted.t": "t"}
	link := ent{Name: "usr/bin/ping6", Type: tar.TypeLink, Link: "usr/bin/ping"}
	dropped := file("usr/bin/other", "other\n")
	dropped.Xattrs = map[string]string{"security.selinux": "system_u:object_r:bin_t:s0", "trusted.overlay.opaque": "y", "security.capability": "\x01\x00\x00\x02"}
	return []ent{dir("usr"), bin, ping, link, dropped}, []ent{file("usr/bin/new", "new\n")}
}

// TestImportXattrs: extended attributes of an image's tar (PAX
// SCHILY.xattr records) are kept in the layer manifests whatever the
// source (layout, docker-archive, registry: the same layers) and applied to
// the store's trees, the merged copy and an overlay mount of the image: the
// file capability, trusted.* and user.* as root; user.* and the capability
// (revision 3 for the caller's namespaces: store/capability.go) in a
// rootless store, which cannot set trusted.* (TestImportRootless). What a
// runtime drops is dropped.
func TestImportXattrs(t *testing.T) {
	base, top := xattrLayers()
	img := buildImage(t, v1.Config{}, base, top)
	sources := map[string]string{
		"layout":         "oci:" + writeLayout(t, img, ""),
		"docker-archive": "docker-archive:" + writeDockerArchive(t, img, "example.com/x/caps:1"),
	}
	addr := startRegistry(t)
	tag, err := name.NewTag(addr+"/x/caps:1", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(tag, img, remote.WithContext(context.Background())); err != nil {
		t.Fatal(err)
	}
	sources["registry"] = "docker://" + addr + "/x/caps:1"
	var layers []store.LayerID
	for what, src := range sources {
		t.Run(what, func(t *testing.T) {
			st := openStore(t)
			imp, err := importSource(t, st, src, OpenOptions{Insecure: true})
			if err != nil {
				t.Fatal(err)
			}
			if layers == nil {
				layers = imp.Record.Layers
			} else if !slices.Equal(layers, imp.Record.Layers) {
				t.Fatalf("layers %v, another source gave %v", imp.Record.Layers, layers)
			}
			checkXattrManifest(t, st, imp.Record.Layers)
			root, rt := merged(t, st, DigestRef(imp.Record.Digest))
			checkXattrTree(t, st, root)
			checkXattrTree(t, st, st.TreePath(imp.Record.Layers[0]))
			if !st.Rootless() {
				checkXattrTree(t, st, overlayOf(t, st, rt.Layers))
			}
			mustVerify(t, st)
		})
	}
}

// checkXattrManifest: the manifests hold what the tar had, minus what is
// dropped, in root and rootless stores alike.
func checkXattrManifest(t *testing.T, st *store.Store, layers []store.LayerID) {
	t.Helper()
	want := map[string][]string{
		"usr/bin":       {"user.dirmark"},
		"usr/bin/ping":  {"security.capability", "trusted.t", "user.mime"},
		"usr/bin/ping6": {"security.capability", "trusted.t", "user.mime"},
		"usr/bin/other": nil,
	}
	for i, id := range layers {
		m, err := st.Manifest(id)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range m.Entries {
			w, ok := want[e.Path]
			if !ok {
				continue
			}
			var names []string
			for _, x := range e.Xattrs {
				names = append(names, x.Name)
				if x.Name == "security.capability" && !bytes.Equal(x.Value, capNetBindService) {
					t.Errorf("layer %d %s: capability %x", i, e.Path, x.Value)
				}
			}
			if i == 1 && e.Path != "usr/bin" {
				continue
			}
			if !slices.Equal(names, w) {
				t.Errorf("layer %d %s: xattrs %v, want %v", i, e.Path, names, w)
			}
		}
	}
}

// checkXattrTree: the files of root carry the attributes the store can set.
func checkXattrTree(t *testing.T, st *store.Store, root string) {
	t.Helper()
	get := func(p, name string) (string, bool) {
		buf := make([]byte, 256)
		n, err := unix.Lgetxattr(filepath.Join(root, p), name, buf)
		if err != nil {
			return "", false
		}
		return string(buf[:n]), true
	}
	for _, p := range []string{"usr/bin/ping", "usr/bin/ping6"} {
		if v, ok := get(p, "user.mime"); !ok || v != "application/x-ping" {
			t.Errorf("%s in %s: user.mime %q %v", p, root, v, ok)
		}
		v, ok := get(p, "security.capability")
		if st.Rootless() {
			// Set through a user namespace whose root is the caller: from
			// outside, revision 3 with the caller's uid as its rootid.
			want := append(slices.Clone(capNetBindService), 0, 0, 0, 0)
			want[3] = 3
			binary.LittleEndian.PutUint32(want[20:], uint32(os.Geteuid()))
			if !ok || v != string(want) {
				t.Errorf("%s in %s: security.capability %x %v, want %x", p, root, v, ok, want)
			}
			if _, ok := get(p, "trusted.t"); ok {
				t.Errorf("%s in %s: a rootless store set trusted.t", p, root)
			}
			continue
		}
		if !ok || v != string(capNetBindService) {
			t.Errorf("%s in %s: security.capability %x %v, want %x", p, root, v, ok, capNetBindService)
		}
		if v, ok := get(p, "trusted.t"); !ok || v != "t" {
			t.Errorf("%s in %s: trusted.t %q %v", p, root, v, ok)
		}
	}
	if v, ok := get("usr/bin", "user.dirmark"); !ok || v != "d" {
		t.Errorf("usr/bin in %s: user.dirmark %q %v", root, v, ok)
	}
	for _, name := range []string{"security.capability", "security.selinux", "trusted.overlay.opaque"} {
		if _, ok := get("usr/bin/other", name); ok {
			t.Errorf("usr/bin/other in %s has %s, which the import drops", root, name)
		}
	}
}

// overlayOf mounts the layers (bottom first) read-only with overlayfs, as
// a sandbox's root is, and unmounts it after the test.
func overlayOf(t *testing.T, st *store.Store, bottomFirst []store.LayerID) string {
	t.Helper()
	var lowers []string
	for i := len(bottomFirst) - 1; i >= 0; i-- {
		lowers = append(lowers, st.TreePath(bottomFirst[i]))
	}
	target := t.TempDir()
	opts := "lowerdir=" + lowers[0]
	for _, l := range lowers[1:] {
		opts += ":" + l
	}
	if err := unix.Mount("overlay", target, "overlay", unix.MS_RDONLY, opts); err != nil {
		t.Fatalf("mount overlay %s: %v", opts, err)
	}
	t.Cleanup(func() { unix.Unmount(target, unix.MNT_DETACH) })
	return target
}
