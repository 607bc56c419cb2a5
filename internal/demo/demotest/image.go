package demotest

import (
	"archive/tar"
	"bytes"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// The image of an image instance, made here without a registry: the
// tools the task and eval scripts run and the demo's Python, copied from
// the host, with a repository at /testbed.

// ImageRootfs is a root filesystem made on the host: bash, git, coreutils
// and Python (the demo's version) with what they link, and the demo
// repository at commit in /testbed.
func ImageRootfs(t *testing.T, repoDir, commit, pyVersion string) string {
	t.Helper()
	py := "/usr/bin/python" + pyVersion
	bins := []string{"/usr/bin/git", py, "/usr/bin/patch"}
	for _, tool := range []string{"cat", "cp", "mkdir", "mktemp", "rm", "grep", "sed", "env", "ls", "mv", "chmod", "touch", "head", "tail", "tr", "sort", "uniq", "wc", "true", "false", "sleep", "id"} {
		bins = append(bins, "/usr/bin/"+tool)
	}
	root := HostRootfs(t, []string{"/usr/lib/python" + pyVersion}, bins...)
	for name, target := range map[string]string{"usr/bin/python": "python" + pyVersion, "usr/bin/python3": "python" + pyVersion} {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	tb := filepath.Join(root, "testbed")
	for _, args := range [][]string{{"clone", "-q", repoDir, tb}, {"-C", tb, "checkout", "-q", "--detach", commit}, {"-C", tb, "remote", "remove", "origin"}} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
	return root
}

// Image is the tree at root as a one-layer image with env in its config
// and /testbed its working directory; owners are root's.
func Image(t *testing.T, root string, env ...string) v1.Image {
	t.Helper()
	return ImageOwned(t, root, nil, env...)
}

// ImageOwned is Image with the owner of each path (relative to root) that
// owner gives; nil: root's.
func ImageOwned(t *testing.T, root string, owner func(rel string) (uid, gid int), env ...string) v1.Image {
	t.Helper()
	layer := DirLayer(t, root, owner)
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		t.Fatal(err)
	}
	if img, err = mutate.Config(img, v1.Config{Env: append([]string{"PATH=/usr/bin:/bin"}, env...), WorkingDir: "/testbed"}); err != nil {
		t.Fatal(err)
	}
	return img
}

// DirLayer is an image layer holding the tree at root, each path owned as
// owner says (relative to root; nil: by root), without user or group names.
func DirLayer(t testing.TB, root string, owner func(rel string) (uid, gid int)) v1.Layer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		return tarEntry(tw, p, filepath.ToSlash(rel), d, owner)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return BytesLayer(t, buf.Bytes())
}

// tarEntry writes the file at p as name, with its content when regular.
func tarEntry(tw *tar.Writer, p, name string, d fs.DirEntry, owner func(rel string) (uid, gid int)) error {
	fi, err := d.Info()
	if err != nil {
		return err
	}
	link := ""
	if fi.Mode()&fs.ModeSymlink != 0 {
		if link, err = os.Readlink(p); err != nil {
			return err
		}
	}
	h, err := tar.FileInfoHeader(fi, link)
	if err != nil {
		return err
	}
	h.Name, h.Uid, h.Gid, h.Uname, h.Gname = name, 0, 0, "", ""
	if owner != nil {
		h.Uid, h.Gid = owner(name)
	}
	if fi.IsDir() {
		h.Name += "/"
	}
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return nil
	}
	r, err := os.Open(p)
	if err != nil {
		return err
	}
	defer r.Close()
	_, err = io.Copy(tw, r)
	return err
}

// BytesLayer is an image layer whose uncompressed tar is b.
func BytesLayer(t testing.TB, b []byte) v1.Layer {
	t.Helper()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// HostRootfs is a root filesystem made on the host: bash and bins (host
// paths under /usr/bin or /usr/sbin) with the libraries they link, and
// extra (files or directories), copied under /usr; /bin, /lib, /lib64
// and /sbin link into /usr, sh is bash, /tmp, /etc and /root exist.
func HostRootfs(t *testing.T, extra []string, bins ...string) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "rootfs")
	bins = append([]string{"/usr/bin/bash"}, bins...)
	files := append(slices.Clone(extra), bins...)
	for _, bin := range bins {
		out, err := exec.Command("ldd", bin).Output()
		if err != nil {
			continue // static, or not a binary
		}
		for _, w := range strings.Fields(string(out)) {
			if strings.HasPrefix(w, "/") {
				files = append(files, w)
			}
		}
	}
	for _, f := range files {
		real, err := filepath.EvalSymlinks(f)
		if err != nil {
			t.Fatalf("the image needs %s from the host: %v", f, err)
		}
		dst := filepath.Join(root, "usr", strings.TrimPrefix(strings.TrimPrefix(f, "/usr"), "/"))
		os.MkdirAll(filepath.Dir(dst), 0o755)
		if out, err := exec.Command("cp", "-a", "--no-preserve=ownership", real, dst).CombinedOutput(); err != nil {
			t.Fatalf("cp %s: %v: %s", real, err, out)
		}
	}
	for name, target := range map[string]string{"bin": "usr/bin", "lib": "usr/lib", "lib64": "usr/lib64", "sbin": "usr/sbin", "usr/bin/sh": "bash"} {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"tmp", "etc", "root"} {
		os.MkdirAll(filepath.Join(root, d), 0o755)
	}
	// /tmp as every distribution's root has it: a sandbox's /tmp is the
	// root's own (docs/sandbox.md), which an image's user writes to.
	if err := os.Chmod(filepath.Join(root, "tmp"), 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	return root
}
