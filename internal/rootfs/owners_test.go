package rootfs

import (
	"context"
	"reflect"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// owned is an entry of a test layer with an owner.
func owned(e ent, uid, gid int) ent {
	e.UID, e.GID = uid, gid
	return e
}

// TestOwners lists an imported image's paths not owned by root as the
// overlay of its layers shows them: a later layer's root owner, a
// whiteout and an opaque directory each take paths off the list, and a
// path owned in a lower layer stays listed under an upper one that does
// not name it.
func TestOwners(t *testing.T) {
	st := openStore(t)
	img := buildImage(t, v1.Config{User: "app"},
		[]ent{
			dir("home"), owned(dir("home/app"), 1000, 1000), owned(file("home/app/.profile", "PS1=$ "), 1000, 1000),
			owned(dir("srv"), 33, 33), owned(file("srv/a", "a"), 33, 33), owned(file("srv/b", "b"), 0, 33),
			dir("etc"), file("etc/passwd", "root:x:0:0::/root:/bin/sh\napp:x:1000:1000::/home/app:/bin/sh\n"),
		},
		[]ent{
			file("home/app/.profile", "PS1=# "), file("srv/.wh.a", ""),
			owned(dir("opt"), 5, 5), owned(file("opt/tool", "t"), 5, 5), owned(file("etc/motd", "hi"), 7, 0),
		},
		[]ent{dir("opt"), file("opt/.wh..wh..opq", ""), file("opt/new", "n")},
	)
	imp, err := importSource(t, st, "oci:"+writeLayout(t, img, ""), OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	root, err := Image{Ref: DigestRef(imp.Record.Digest)}.Root(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Owners(st, root.Layers)
	if err != nil {
		t.Fatal(err)
	}
	want := []Owner{
		{"etc/motd", 7, 0}, {"home/app", 1000, 1000}, {"srv", 33, 33}, {"srv/b", 0, 33},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Owners = %v, want %v", got, want)
	}
}
