package engine

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/demo/demotest"
	"github.com/minisandbox/msb/internal/privtest"
	"github.com/minisandbox/msb/internal/store"
)

// TestImageShifted: an image whose user owns a large tree, in two layers
// (the upper one deletes an owned file, gives another to root and adds
// one). Its sandboxes see the owners, modes, setuid bit, symlink, hard link
// and private directory of the image; rootless, through a shifted layer
// made once (the second sandbox uses the same), so the sandbox's writable
// layer stays small: without it, each chown copied the owned files up
// into the sandbox's disk, 8 MiB here. Root mode has no shifted layer.
func TestImageShifted(t *testing.T) {
	g := generated(t)
	e := openEngine(t, "", nil)
	ctx := context.Background()
	root := demotest.ImageRootfs(t, g.RepoDir, g.Instances[0].BaseCommit, g.PyVersion)
	home := filepath.Join(root, "home", "calc")
	big := make([]byte, 8<<20)
	rand.Read(big)
	files := map[string][]byte{"big.bin": big, "run.sh": []byte("#!/bin/sh\n"), "a.txt": []byte("same\n"), "b.txt": []byte("same\n"),
		"gone.txt": []byte("gone\n"), "over.txt": []byte("over\n"), "private/secret": []byte("secret\n")}
	if err := os.MkdirAll(filepath.Join(home, "private"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(home, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name, mode := range map[string]os.FileMode{"run.sh": 0o755 | os.ModeSetuid, "private/secret": 0o600, "private": 0o700} {
		if err := os.Chmod(filepath.Join(home, name), mode); err != nil {
			t.Fatal(err)
		}
	}
	for i := range ownedDirs / 2 { // nested: tree/dNN/sub, depths 3 and 4 of owned directories
		if err := os.MkdirAll(filepath.Join(home, "tree", fmt.Sprintf("d%02d", i), "sub"), 0o750); err != nil {
			t.Fatal(err)
		}
	}
	// Directories the upper layer gives to root (mixed/a), makes opaque
	// (mixed/b, hiding its sub) and gives to calc (/opt/shared).
	for _, d := range []string{"home/calc/mixed/a/sub", "home/calc/mixed/b/sub", "opt/shared"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("big.bin", filepath.Join(home, "link")); err != nil {
		t.Fatal(err)
	}
	passwd := "root:x:0:0::/root:/bin/bash\ncalc:x:1000:1000::/home/calc:/bin/bash\n"
	if err := os.WriteFile(filepath.Join(root, "etc", "passwd"), []byte(passwd), 0o644); err != nil {
		t.Fatal(err)
	}
	calc := func(name string) (int, int) {
		if name == "home/calc" || strings.HasPrefix(name, "home/calc/") && name != "home/calc/over.txt" {
			return 1000, 1000
		}
		return 0, 0
	}
	upper := t.TempDir()
	uhome := filepath.Join(upper, "home", "calc")
	if err := os.MkdirAll(uhome, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"home/calc/mixed/a", "home/calc/mixed/b", "opt/shared"} {
		if err := os.MkdirAll(filepath.Join(upper, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, b := range map[string]string{".wh.gone.txt": "", "over.txt": "root's\n", "new.txt": "new\n", "mixed/b/.wh..wh..opq": "", "mixed/b/new": "new\n"} {
		if err := os.WriteFile(filepath.Join(uhome, name), []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	upperOwner := func(name string) (int, int) {
		switch name {
		case "home/calc/mixed/a":
			return 0, 0
		case "opt/shared":
			return 1000, 1000
		}
		return calc(name)
	}
	img, err := mutate.AppendLayers(demotest.ImageOwned(t, root, calc), demotest.DirLayer(t, upper, upperOwner))
	if err != nil {
		t.Fatal(err)
	}
	img = asCalc(t, img)
	const ref = "example.com/msb-test/engine-shifted:1"
	importImage(t, e, ref, img)

	st := e.cache.st()
	const probe = `cd /home/calc && python3 -c '
import os, stat
for n in [".", "big.bin", "run.sh", "a.txt", "private", "private/secret", "over.txt", "new.txt", "link",
          "mixed/a", "mixed/a/sub", "mixed/b", "mixed/b/new", "/opt/shared"]:
    s = os.lstat(n)
    print(n, "%d:%d %o" % (s.st_uid, s.st_gid, stat.S_IMODE(s.st_mode)))
print(open("private/secret").read(), end="")
print("present" if os.path.lexists("gone.txt") else "gone")
print("linked" if os.stat("a.txt").st_ino == os.stat("b.txt").st_ino else "copies")
print(os.readlink("link"))
print("same" if open("big.bin", "rb").read() == open("link", "rb").read() else "differ")
print("present" if os.path.lexists("mixed/b/sub") else "hidden")
dirs = 0
for d, _, _ in os.walk("tree"):
    s = os.lstat(d)
    if d != "tree" and (s.st_uid, s.st_gid, stat.S_IMODE(s.st_mode)) == (1000, 1000, 0o750):
        dirs += 1
print(dirs)
s = os.statvfs("/")
print((s.f_blocks - s.f_bfree) * s.f_frsize, s.f_files - s.f_ffree)
'`
	want := ". 1000:1000 755\nbig.bin 1000:1000 644\nrun.sh 1000:1000 4755\na.txt 1000:1000 644\nprivate 1000:1000 700\n" +
		"private/secret 1000:1000 600\nover.txt 0:0 644\nnew.txt 1000:1000 644\nlink 1000:1000 777\n" +
		"mixed/a 0:0 755\nmixed/a/sub 1000:1000 755\nmixed/b 1000:1000 755\nmixed/b/new 1000:1000 644\n/opt/shared 1000:1000 755\n" +
		"secret\ngone\nlinked\nbig.bin\nsame\nhidden\n" +
		strconv.Itoa(ownedDirs) + "\n"
	before := shiftedTrees(t, st)
	var mine string
	var mineIno uint64
	for i := range 2 {
		sb, err := e.CreateSandbox(ctx, SandboxRequest{Image: ref})
		if err != nil {
			t.Fatal(err)
		}
		res, err := sb.Exec(ctx, api.ExecRequest{Command: probe, TimeoutNs: int64(time.Minute)})
		sb.Close()
		if err != nil || res.ExitCode != 0 || !strings.HasPrefix(res.Stdout, want) {
			t.Fatalf("sandbox %d on the image: %v %+v\nwant %q then the disk's use", i, err, res, want)
		}
		used, inodes := diskUse(t, strings.TrimPrefix(res.Stdout, want))
		t.Logf("sandbox %d: its writable layer's disk holds %d bytes in %d inodes", i, used, inodes)
		made := slices.DeleteFunc(shiftedTrees(t, st), func(p string) bool { return slices.Contains(before, p) })
		if !st.Rootless() {
			if len(made) != 0 {
				t.Fatalf("root mode made shifted trees: %v", made)
			}
			continue
		}
		if used > int64(len(big))/2 {
			t.Errorf("sandbox %d: its writable layer's disk holds %d bytes after create: the owned tree was copied up", i, used)
		}
		if inodes >= ownedDirs/2 {
			t.Errorf("sandbox %d: its writable layer's disk holds %d inodes after create: the %d owned directories were copied up", i, inodes, ownedDirs)
		}
		if len(made) != 1 {
			t.Fatalf("sandbox %d: new shifted trees %v, want one", i, made)
		}
		var sst syscall.Stat_t
		if err := syscall.Stat(made[0], &sst); err != nil {
			t.Fatal(err)
		}
		if i == 1 && sst.Ino != mineIno {
			t.Errorf("the second sandbox made the shifted tree again")
		}
		mine, mineIno = made[0], sst.Ino
	}
	if !st.Rootless() {
		return
	}
	// On disk, the copies belong to the subordinate ids, the directories
	// to the caller, who can remove the tree (as GC does).
	var sst syscall.Stat_t
	if err := syscall.Stat(filepath.Join(mine, "home", "calc", "big.bin"), &sst); err != nil {
		t.Fatal(err)
	}
	if int(sst.Uid) == os.Getuid() || sst.Size != int64(len(big)) {
		t.Errorf("the shifted big.bin: uid %d (the caller is %d), size %d", sst.Uid, os.Getuid(), sst.Size)
	}
	if err := syscall.Lstat(filepath.Join(filepath.Dir(mine), "dirs", "3", "home", "calc", "tree", "d07"), &sst); err != nil || int(sst.Uid) == os.Getuid() {
		t.Errorf("the shifted tree/d07, an owned directory of depth 3: %v, uid %d (the caller is %d)", err, sst.Uid, os.Getuid())
	}

	// A snapshot's own files: the forks of a snapshot share one shifted
	// layer of them, above the image's, and copy none of them up.
	sb, err := e.CreateSandbox(ctx, SandboxRequest{Image: ref})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	const write = "mkdir -p mine/a/b && head -c 4194304 /dev/urandom > mine/a/b/big && for i in {1..20}; do mkdir mine/d$i; done && chmod 700 mine/d1"
	if res, err := sb.Exec(ctx, api.ExecRequest{Command: write, TimeoutNs: int64(time.Minute)}); err != nil || res.ExitCode != 0 {
		t.Fatalf("writing the snapshot's files: %v %+v", err, res)
	}
	name := "shifted-" + sb.ID()
	if _, err := e.Snapshot(ctx, sb.ID(), api.SnapshotRequest{Name: name}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.DeleteSnapshot(name) })
	before = shiftedTrees(t, st)
	kids, err := e.Fork(ctx, sb.ID(), api.ForkRequest{Snapshot: name, Count: 2})
	if err != nil {
		t.Fatal(err)
	}
	const kidProbe = `cd /home/calc && python3 -c '
import os, stat
for n in ["mine", "mine/a/b", "mine/a/b/big", "mine/d1", "mine/d20", "tree/d07/sub", "big.bin"]:
    s = os.lstat(n)
    print(n, "%d:%d %o" % (s.st_uid, s.st_gid, stat.S_IMODE(s.st_mode)))
s = os.statvfs("/")
print((s.f_blocks - s.f_bfree) * s.f_frsize, s.f_files - s.f_ffree)
'`
	const kidWant = "mine 1000:1000 755\nmine/a/b 1000:1000 755\nmine/a/b/big 1000:1000 644\nmine/d1 1000:1000 700\nmine/d20 1000:1000 755\n" +
		"tree/d07/sub 1000:1000 750\nbig.bin 1000:1000 644\n"
	for i, kid := range kids {
		res, err := kid.Exec(ctx, api.ExecRequest{Command: kidProbe, TimeoutNs: int64(time.Minute)})
		kid.Close()
		if err != nil || res.ExitCode != 0 || !strings.HasPrefix(res.Stdout, kidWant) {
			t.Fatalf("fork %d: %v %+v\nwant %q then the disk's use", i, err, res, kidWant)
		}
		used, inodes := diskUse(t, strings.TrimPrefix(res.Stdout, kidWant))
		t.Logf("fork %d: its writable layer's disk holds %d bytes in %d inodes", i, used, inodes)
		if used > 2<<20 || inodes >= 20 {
			t.Errorf("fork %d: its writable layer's disk holds %d bytes in %d inodes after create: the snapshot's files were copied up", i, used, inodes)
		}
	}
	made := slices.DeleteFunc(shiftedTrees(t, st), func(p string) bool { return slices.Contains(before, p) })
	if len(made) != 1 {
		t.Fatalf("the forks made shifted layers %v, want one", made)
	}
	// A sandbox on the snapshot as its image mounts the forks' chain.
	onSnap, err := e.CreateSandbox(ctx, SandboxRequest{Image: "snapshot/" + name})
	if err != nil {
		t.Fatal(err)
	}
	res, err := onSnap.Exec(ctx, api.ExecRequest{Command: kidProbe, TimeoutNs: int64(time.Minute)})
	onSnap.Close()
	if err != nil || res.ExitCode != 0 || !strings.HasPrefix(res.Stdout, kidWant) {
		t.Fatalf("a sandbox on the snapshot: %v %+v\nwant %q then the disk's use", err, res, kidWant)
	}
	if again := slices.DeleteFunc(shiftedTrees(t, st), func(p string) bool { return slices.Contains(before, p) }); !slices.Equal(again, made) {
		t.Errorf("a sandbox on the snapshot made shifted layers: %v, want the forks' %v alone", again, made)
	}
	var sh struct{ Base int }
	if b, err := os.ReadFile(filepath.Join(filepath.Dir(made[0]), "owners.json")); err != nil || json.Unmarshal(b, &sh) != nil || sh.Base == 0 {
		t.Errorf("the forks' shifted layer: %v, base %d, want one above the image's", err, sh.Base)
	}

	// msb cache du counts them apart from the layers; gc, once the
	// snapshot is gone, removes its shifted layer and says its bytes.
	u, err := e.cache.Usage(ctx)
	if n := len(shiftedTrees(t, st)); err != nil || u.Shifted != n || u.ShiftedBytes < int64(len(big))+4<<20 || u.ShiftedBytes > u.DiskBytes-u.TreeBytes {
		t.Errorf("cache usage: %v: %d shifted layers of %d bytes (%d on disk, %d the layers' files), want %d of at least %d bytes apart from the layers'",
			err, u.Shifted, u.ShiftedBytes, u.DiskBytes, u.TreeBytes, n, len(big)+4<<20)
	}
	sb.Close()
	if err := e.DeleteSnapshot(name); err != nil {
		t.Fatal(err)
	}
	if r, err := e.cache.GC(ctx); err != nil || r.Shifted != 1 || r.ShiftedBytes < 4<<20 || r.FreedBytes < r.ShiftedBytes {
		t.Errorf("gc of the snapshot: %+v %v, want its shifted layer and its 4 MiB", r, err)
	}
	if err := os.RemoveAll(filepath.Join(st.Root(), "shifted")); err != nil {
		t.Fatalf("the caller cannot remove the shifted layers: %v", err)
	}
}

// ownedDirs is how many directories the image's user owns under
// /home/calc/tree in TestImageShifted.
const ownedDirs = 64

// diskUse reads the bytes and inodes a probe printed.
func diskUse(t *testing.T, s string) (bytes, inodes int64) {
	t.Helper()
	if _, err := fmt.Sscan(s, &bytes, &inodes); err != nil {
		t.Fatalf("reading the disk's use from %q: %v", s, err)
	}
	return bytes, inodes
}

// TestImageShiftedRootless reruns TestImageShifted as an unprivileged
// user with subordinate ids.
func TestImageShiftedRootless(t *testing.T) { privtest.Unprivileged(t, "^TestImageShifted$") }

// shiftedTrees lists the store's shifted trees.
func shiftedTrees(t *testing.T, st *store.Store) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(st.Root(), "shifted"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), ".") {
			out = append(out, filepath.Join(st.Root(), "shifted", e.Name(), "tree"))
		}
	}
	return out
}

// asCalc is img run as calc in /home/calc.
func asCalc(t *testing.T, img v1.Image) v1.Image {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	conf := cf.Config
	conf.WorkingDir, conf.User = "/home/calc", "calc"
	img, err = mutate.Config(img, conf)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// TestImageStacksShifted: two sandboxes on one image, each with other
// layers above it (the tasks of two instances on the image, say), and
// none on the image alone before them. They share one shifted layer of
// the image's own layers (the engine says where those end:
// sandbox.Config.ImageLayers), each with a chained one of its layers
// above (empty here), where each made one of its whole stack before,
// a copy of the image's owned files each. Both see the owners.
func TestImageStacksShifted(t *testing.T) {
	e := openEngine(t, "", nil)
	ctx := context.Background()
	const ref = "example.com/msb-test/engine-stacks-shifted:1"
	imageIDs, bigSize := calcImage(t, e, ref)

	st := e.cache.st()
	var stacks []string // each a layer above the image, as a task's
	for _, name := range []string{"a", "b"} {
		dir := t.TempDir()
		if err := os.Chmod(dir, 0o755); err != nil { // the root's mode
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(dir, "opt"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "opt", name+".txt"), []byte(name+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		id, err := st.CommitDir(ctx, dir, store.CommitOptions{Parents: []store.LayerID{imageIDs[len(imageIDs)-1]},
			Ref: "test/stack-" + name, MapOwner: func(uint32, uint32) (uint32, uint32) { return 0, 0 }})
		if err != nil {
			t.Fatal(err)
		}
		stacks = append(stacks, id.String())
	}

	const probe = `python3 -c '
import os, stat
for n in ["/home/calc", "/home/calc/big.bin", "/home/calc/own", "/home/calc/own/sub", "/opt"]:
    s = os.lstat(n)
    print(n, "%d:%d %o" % (s.st_uid, s.st_gid, stat.S_IMODE(s.st_mode)))
print(sorted(os.listdir("/opt")))
s = os.statvfs("/")
print((s.f_blocks - s.f_bfree) * s.f_frsize, s.f_files - s.f_ffree)
'`
	before := shiftedTrees(t, st)
	for i, layer := range stacks {
		sb, err := e.CreateSandbox(ctx, SandboxRequest{Image: ref, Layers: []string{layer}})
		if err != nil {
			t.Fatal(err)
		}
		res, err := sb.Exec(ctx, api.ExecRequest{Command: probe, TimeoutNs: int64(time.Minute)})
		sb.Close()
		want := "/home/calc 1000:1000 755\n/home/calc/big.bin 1000:1000 644\n/home/calc/own 1000:1000 750\n" +
			"/home/calc/own/sub 1000:1000 750\n/opt 0:0 755\n" + fmt.Sprintf("['%c.txt']\n", 'a'+i)
		if err != nil || res.ExitCode != 0 || !strings.HasPrefix(res.Stdout, want) {
			t.Fatalf("sandbox %d on the image and its layer: %v %+v\nwant %q then the disk's use", i, err, res, want)
		}
		used, inodes := diskUse(t, strings.TrimPrefix(res.Stdout, want))
		t.Logf("sandbox %d: its writable layer's disk holds %d bytes in %d inodes", i, used, inodes)
		if st.Rootless() && used > bigSize/2 {
			t.Errorf("sandbox %d: its writable layer's disk holds %d bytes after create: the owned file was copied up", i, used)
		}
	}
	made := slices.DeleteFunc(shiftedTrees(t, st), func(p string) bool { return slices.Contains(before, p) })
	if !st.Rootless() {
		if len(made) != 0 {
			t.Fatalf("root mode made shifted trees: %v", made)
		}
		return
	}
	var whole []string // shifted layers of a stack's bottom: copies of the image's owned files
	for _, tree := range made {
		var sh struct{ Base int }
		b, err := os.ReadFile(filepath.Join(filepath.Dir(tree), "owners.json"))
		if err != nil || json.Unmarshal(b, &sh) != nil {
			t.Fatalf("%s: %v", tree, err)
		}
		if sh.Base == 0 {
			whole = append(whole, tree)
		} else if sh.Base != len(imageIDs) {
			t.Errorf("%s: a shifted layer above the stack's %d bottom layers, want above the image's %d", tree, sh.Base, len(imageIDs))
		}
	}
	if len(whole) != 1 {
		t.Fatalf("the two stacks made %d shifted layers of their bottom (%v), want one, of the image's layers", len(whole), whole)
	}
	b, err := os.ReadFile(filepath.Join(filepath.Dir(whole[0]), "layers"))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, id := range imageIDs {
		want = append(want, id.Hex())
	}
	if got := strings.Fields(string(b)); !slices.Equal(got, want) {
		t.Errorf("the shared shifted layer's layers: %v, want the image's %v", got, want)
	}
	if len(made) != 3 {
		t.Errorf("shifted layers made: %d, want the image's and one above it for each stack", len(made))
	}
	sb, err := e.CreateSandbox(ctx, SandboxRequest{Image: ref}) // on the image alone: its shifted layer
	if err != nil {
		t.Fatal(err)
	}
	res, err := sb.Exec(ctx, api.ExecRequest{Command: `python3 -c 'import os; print(os.stat("/home/calc/big.bin").st_uid)'`, TimeoutNs: int64(time.Minute)})
	sb.Close()
	if err != nil || res.Stdout != "1000\n" {
		t.Fatalf("a sandbox on the image: %v %+v", err, res)
	}
	if n := len(shiftedTrees(t, st)) - len(before); n != len(made) {
		t.Errorf("a sandbox on the image alone made %d more shifted layers, want none", n-len(made))
	}
}

// TestImageStacksShiftedRootless reruns TestImageStacksShifted as an
// unprivileged user with subordinate ids.
func TestImageStacksShiftedRootless(t *testing.T) {
	privtest.Unprivileged(t, "^TestImageStacksShifted$")
}

// deepOwned is how deep the owned directories of TestImageDeepShifted
// nest (home/calc and 40 below it, then a side directory in the last):
// deeper than the 12 directory layers a shifted layer had until session
// 16.
const deepOwned = 41

// TestImageDeepShifted: an image whose user owns directories nested 42
// deep (a node_modules of node_modules, a Maven ~/.m2), with a file and a
// second owned directory beside each, in a private one at the bottom.
// Its sandbox sees every owner and mode; rootless, through one shifted
// layer with a directory layer per depth, which leaves init nothing to
// chown (none of its directories is copied up: before, those below 12
// owned ones were), and a rollback mounts it again (a reset names more
// lower dirs than fsconfig's 256-byte string takes at once).
func TestImageDeepShifted(t *testing.T) {
	g := generated(t)
	e := openEngine(t, "", nil)
	ctx := context.Background()
	root := demotest.ImageRootfs(t, g.RepoDir, g.Instances[0].BaseCommit, g.PyVersion)
	d := filepath.Join(root, "home", "calc")
	for i := range deepOwned - 1 {
		d = filepath.Join(d, fmt.Sprintf("n%d", i))
		if err := os.MkdirAll(filepath.Join(d, "side"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "f"), []byte(strconv.Itoa(i)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(d, 0o700); err != nil {
		t.Fatal(err)
	}
	const ref = "example.com/msb-test/engine-deep-shifted:1"
	importCalcOwned(t, e, root, ref)
	st := e.cache.st()

	// Every directory and file under /home/calc, and its owner and mode
	// where they are not calc's with the default modes.
	const probe = `cd /home/calc && python3 -c '
import os, stat
dirs = files = 0
for d, ds, fs in os.walk("."):
    for n in [d] + [os.path.join(d, f) for f in fs]:
        s = os.lstat(n)
        mode = stat.S_IMODE(s.st_mode)
        if (s.st_uid, s.st_gid) != (1000, 1000) or mode not in (0o755, 0o644) and not n.endswith("/n39"):
            print("odd", n, s.st_uid, s.st_gid, oct(mode))
    dirs, files = dirs + 1, files + len(fs)
print(dirs, files, oct(stat.S_IMODE(os.lstat("/".join("n%d" % i for i in range(40))).st_mode)))
s = os.statvfs("/")
print((s.f_blocks - s.f_bfree) * s.f_frsize, s.f_files - s.f_ffree)
'`
	want := fmt.Sprintf("%d %d 0o700\n", 1+2*(deepOwned-1), deepOwned-1)
	check := func(what string, sb *Sandbox) {
		t.Helper()
		res, err := sb.Exec(ctx, api.ExecRequest{Command: probe, TimeoutNs: int64(time.Minute)})
		if err != nil || res.ExitCode != 0 || !strings.HasPrefix(res.Stdout, want) {
			t.Fatalf("%s: %v %+v\nwant %q then the disk's use", what, err, res, want)
		}
		used, inodes := diskUse(t, strings.TrimPrefix(res.Stdout, want))
		t.Logf("%s: its writable layer's disk holds %d bytes in %d inodes", what, used, inodes)
		if st.Rootless() && inodes >= deepOwned/2 {
			t.Errorf("%s: its writable layer's disk holds %d inodes: the deep owned directories were copied up", what, inodes)
		}
	}
	before := shiftedTrees(t, st)
	sb, err := e.CreateSandbox(ctx, SandboxRequest{Image: ref})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	check("the sandbox", sb)
	made := slices.DeleteFunc(shiftedTrees(t, st), func(p string) bool { return slices.Contains(before, p) })
	if !st.Rootless() {
		if len(made) != 0 {
			t.Fatalf("root mode made shifted trees: %v", made)
		}
	} else {
		if len(made) != 1 {
			t.Fatalf("new shifted trees %v, want one", made)
		}
		var sh struct {
			Chowned   []string `json:"chowned"`
			DirLayers int      `json:"dir_layers"`
		}
		if b, err := os.ReadFile(filepath.Join(filepath.Dir(made[0]), "owners.json")); err != nil || json.Unmarshal(b, &sh) != nil {
			t.Fatalf("the shifted layer's owners: %v", err)
		}
		if len(sh.Chowned) != 0 || sh.DirLayers != deepOwned+1 { // the bottom one's side too
			t.Errorf("the shifted layer: %d directory layers, %d directories left to init, want %d and none", sh.DirLayers, len(sh.Chowned), deepOwned+1)
		}
	}

	// A rollback to a snapshot resets the root over the same lower dirs.
	name := "deep-" + sb.ID()
	if _, err := e.Snapshot(ctx, sb.ID(), api.SnapshotRequest{Name: name}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.DeleteSnapshot(name) })
	if res, err := sb.Exec(ctx, api.ExecRequest{Command: "touch /home/calc/n0/extra", TimeoutNs: int64(time.Minute)}); err != nil || res.ExitCode != 0 {
		t.Fatalf("writing: %v %+v", err, res)
	}
	pid := sb.InitPid()
	if _, err := e.Rollback(ctx, sb.ID(), api.RollbackRequest{Snapshot: name}); err != nil {
		t.Fatal(err)
	}
	if sb.sbox().CanReset() == nil && sb.InitPid() != pid {
		t.Errorf("the rollback replaced the sandbox (init %d, was %d): its reset failed", sb.InitPid(), pid)
	}
	check("the sandbox rolled back", sb)
	sb.Close()
	if err := os.RemoveAll(filepath.Join(st.Root(), "shifted")); err != nil {
		t.Fatalf("the caller cannot remove the shifted layers: %v", err)
	}
}

// TestImageDeepShiftedRootless reruns TestImageDeepShifted as an
// unprivileged user with subordinate ids.
func TestImageDeepShiftedRootless(t *testing.T) { privtest.Unprivileged(t, "^TestImageDeepShifted$") }

// TestSnapshotImageShifted: a sandbox on a named snapshot of an image
// sandbox (snapshot/<name> as its image) when no shifted layer of the
// image exists (gone with a gc, or the snapshot pulled from another
// cache) makes the image's own, which the image's sandboxes then share,
// and one for the snapshot's layer chained on it: before, it made one of
// the whole stack, a second copy of the image's owned files. So does a
// fork of the snapshot alone, which then makes no more.
func TestSnapshotImageShifted(t *testing.T) {
	e := openEngine(t, "", nil)
	ctx := context.Background()
	const ref = "example.com/msb-test/engine-snapshot-shifted:1"
	imageIDs, bigSize := calcImage(t, e, ref)
	st := e.cache.st()

	sb, err := e.CreateSandbox(ctx, SandboxRequest{Image: ref})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := sb.Exec(ctx, api.ExecRequest{Command: "mkdir -p mine/a && echo hi > mine/a/f && chmod 700 mine/a", TimeoutNs: int64(time.Minute)}); err != nil || res.ExitCode != 0 {
		sb.Close()
		t.Fatalf("writing the snapshot's files: %v %+v", err, res)
	}
	name := "snapshot-shifted-" + sb.ID()
	_, err = e.Snapshot(ctx, sb.ID(), api.SnapshotRequest{Name: name})
	sb.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.DeleteSnapshot(name) })
	// No shifted layer yet, as after a gc or a pull.
	if err := os.RemoveAll(filepath.Join(st.Root(), "shifted")); err != nil {
		t.Fatal(err)
	}

	const probe = `python3 -c '
import os, stat
for n in ["/home/calc", "/home/calc/big.bin", "/home/calc/own/sub", "/home/calc/mine", "/home/calc/mine/a", "/home/calc/mine/a/f"]:
    s = os.lstat(n)
    print(n, "%d:%d %o" % (s.st_uid, s.st_gid, stat.S_IMODE(s.st_mode)))
s = os.statvfs("/")
print((s.f_blocks - s.f_bfree) * s.f_frsize, s.f_files - s.f_ffree)
'`
	const want = "/home/calc 1000:1000 755\n/home/calc/big.bin 1000:1000 644\n/home/calc/own/sub 1000:1000 750\n" +
		"/home/calc/mine 1000:1000 755\n/home/calc/mine/a 1000:1000 700\n/home/calc/mine/a/f 1000:1000 644\n"
	check := func(what string, sb *Sandbox) {
		t.Helper()
		res, err := sb.Exec(ctx, api.ExecRequest{Command: probe, TimeoutNs: int64(time.Minute)})
		if err != nil || res.ExitCode != 0 || !strings.HasPrefix(res.Stdout, want) {
			t.Fatalf("%s: %v %+v\nwant %q then the disk's use", what, err, res, want)
		}
		used, inodes := diskUse(t, strings.TrimPrefix(res.Stdout, want))
		t.Logf("%s: its writable layer's disk holds %d bytes in %d inodes", what, used, inodes)
		if st.Rootless() && used > bigSize/2 {
			t.Errorf("%s: its writable layer's disk holds %d bytes after create: the owned file was copied up", what, used)
		}
	}
	onSnap, err := e.CreateSandbox(ctx, SandboxRequest{Image: "snapshot/" + name})
	if err != nil {
		t.Fatal(err)
	}
	check("a sandbox on the snapshot", onSnap)
	onSnap.Close()
	made := shiftedTrees(t, st)
	if !st.Rootless() {
		if len(made) != 0 {
			t.Fatalf("root mode made shifted trees: %v", made)
		}
		return
	}
	var image []string
	for _, tree := range made {
		var sh struct{ Base int }
		b, err := os.ReadFile(filepath.Join(filepath.Dir(tree), "owners.json"))
		if err != nil || json.Unmarshal(b, &sh) != nil {
			t.Fatalf("%s: %v", tree, err)
		}
		if sh.Base == 0 {
			image = append(image, tree)
		} else if sh.Base != len(imageIDs) {
			t.Errorf("%s: a shifted layer above the stack's %d bottom layers, want above the image's %d", tree, sh.Base, len(imageIDs))
		}
	}
	if len(image) != 1 || len(made) != 2 {
		t.Fatalf("shifted layers made: %v, of them of the stack's bottom %v: want the image's and one above it", made, image)
	}
	b, err := os.ReadFile(filepath.Join(filepath.Dir(image[0]), "layers"))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, id := range imageIDs {
		ids = append(ids, id.Hex())
	}
	if got := strings.Fields(string(b)); !slices.Equal(got, ids) {
		t.Errorf("the bottom shifted layer's layers: %v, want the image's %v", got, ids)
	}

	// The image's sandboxes and a fork of the snapshot alone use them.
	onImage, err := e.CreateSandbox(ctx, SandboxRequest{Image: ref})
	if err != nil {
		t.Fatal(err)
	}
	onImage.Close()
	kids, err := e.Fork(ctx, "", api.ForkRequest{Snapshot: name})
	if err != nil {
		t.Fatal(err)
	}
	check("a fork of the snapshot", kids[0])
	kids[0].Close()
	if again := shiftedTrees(t, st); !slices.Equal(again, made) {
		t.Errorf("a sandbox on the image and a fork of the snapshot made shifted layers: %v, want none beside %v", again, made)
	}
}

// TestSnapshotImageShiftedRootless reruns TestSnapshotImageShifted as an
// unprivileged user with subordinate ids.
func TestSnapshotImageShiftedRootless(t *testing.T) {
	privtest.Unprivileged(t, "^TestSnapshotImageShifted$")
}

// calcImage imports as ref an image of the generated repository whose
// user calc (1000) owns /home/calc, with a 2 MiB big.bin and own/sub
// (0750) in it, and returns the image's layers and big.bin's size.
func calcImage(t *testing.T, e *Engine, ref string) ([]store.LayerID, int64) {
	t.Helper()
	g := generated(t)
	root := demotest.ImageRootfs(t, g.RepoDir, g.Instances[0].BaseCommit, g.PyVersion)
	home := filepath.Join(root, "home", "calc")
	big := make([]byte, 2<<20)
	rand.Read(big)
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(home, "own", "sub"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "big.bin"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	importCalcOwned(t, e, root, ref)
	ir, err := e.cache.ImageRoot(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	ids := slices.Clone(ir.ids)
	ir.Lease.Release()
	return ids, int64(len(big))
}

// importCalcOwned imports the rootfs root as image ref, run as its user
// calc (1000, written into its /etc/passwd), who owns /home/calc and
// everything under it.
func importCalcOwned(t *testing.T, e *Engine, root, ref string) {
	t.Helper()
	passwd := "root:x:0:0::/root:/bin/bash\ncalc:x:1000:1000::/home/calc:/bin/bash\n"
	if err := os.WriteFile(filepath.Join(root, "etc", "passwd"), []byte(passwd), 0o644); err != nil {
		t.Fatal(err)
	}
	img := asCalc(t, demotest.ImageOwned(t, root, func(name string) (int, int) {
		if name == "home/calc" || strings.HasPrefix(name, "home/calc/") {
			return 1000, 1000
		}
		return 0, 0
	}))
	importImage(t, e, ref, img)
}
