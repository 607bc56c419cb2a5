package task

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/envcache"
	"github.com/minisandbox/msb/internal/privtest"
	"github.com/minisandbox/msb/internal/rootfs"
)

// TestImageInstance runs an instance whose row names an image: the task's
// root is the image (no host directories, no environment built), its
// repository the image's /testbed, the image's Env applies, the agent's
// patch is git diff there, and evaluation in a fresh sandbox on the same
// image grades the gold patch resolved and an empty one not. An image the
// cache lacks is ErrNoImage naming it and the import command.
func TestImageInstance(t *testing.T) {
	f := newFixture(t)
	src := f.gen.Instances[0]
	const name = "example.com/msb-test/calc:1"
	importImage(t, f.env.Cache, imageRootfs(t, f.gen.RepoDir, src.BaseCommit, f.gen.PyVersion), name, "MSB_IMAGE_MARK=from-the-image")
	inst := src
	inst.InstanceID, inst.Repo, inst.Image = "calc__image-1", src.Repo+"-image", name
	inst.RepoURL = "/nonexistent" // the image's repository is used, never cloned
	sp := "  " + inst.Repo + ":\n    \"*\":\n      python: \"" + f.gen.PyVersion + "\"\n      pip_packages: [nothing-to-install]\n      install: \"exit 1\"\n      test_cmd: python -m unittest -v\n      log_parser: unittest\n      directives: none\n"
	tk, err := New(inst, f.overrides(t, sp))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	sb, err := Open(ctx, f.env, tk, Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := sb.run(ctx, "echo $MSB_IMAGE_MARK; test -e /usr/bin/gcc && echo host-leak; git rev-parse HEAD; echo '# agent' >> calc/stats.py", time.Minute)
	if err != nil || res.Output != "from-the-image\n"+src.BaseCommit+"\n" {
		sb.Close()
		t.Fatalf("task sandbox on the image: %v %q", err, res.Output)
	}
	diff, err := sb.Diff(ctx)
	sb.Close()
	if err != nil || !strings.Contains(diff, "+# agent") || !strings.Contains(diff, "calc/stats.py") {
		t.Fatalf("agent's patch: %v %q", err, diff)
	}
	gold := inst.ReferenceFix()
	if ev := Evaluate(ctx, f.env, tk, api.Prediction{InstanceID: inst.InstanceID, Model: "m", ModelPatch: &gold}, opts()); ev.Result.Outcome != api.OutcomeResolved {
		t.Fatalf("gold on the image: %s %s\n%s", ev.Result.Outcome, ev.Result.Detail, ev.Artifacts.TestOutput)
	}
	o := opts()
	o.GradeEmpty = true
	if ev := Evaluate(ctx, f.env, tk, api.Prediction{InstanceID: inst.InstanceID, Model: "m", ModelPatch: ptr("")}, o); ev.Result.Outcome != api.OutcomeUnresolved {
		t.Fatalf("empty patch on the image: %s %s\n%s", ev.Result.Outcome, ev.Result.Detail, ev.Artifacts.TestOutput)
	}

	inst.InstanceID, inst.Image = "calc__image-2", "example.com/msb-test/absent:1"
	tk, err = New(inst, f.overrides(t, sp))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, f.env, tk, Options{}); !errors.Is(err, envcache.ErrNoImage) ||
		!strings.Contains(err.Error(), "msb cache import-image --name "+inst.Image) {
		t.Fatalf("an image the cache lacks: %v", err)
	}
}

// TestRootlessImageInstance reruns TestImageInstance as an unprivileged
// user.
func TestRootlessImageInstance(t *testing.T) {
	privtest.Unprivileged(t, "^TestImageInstance$")
}

// imageRootfs is a root filesystem made on the host: bash, git, coreutils
// and Python (the demo's version) with what they link, and the demo
// repository at commit in /testbed.
func imageRootfs(t *testing.T, repoDir, commit, pyVersion string) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "rootfs")
	py := "/usr/bin/python" + pyVersion
	bins := []string{"/usr/bin/bash", "/usr/bin/git", py, "/usr/bin/patch"}
	for _, tool := range []string{"cat", "cp", "mkdir", "mktemp", "rm", "grep", "sed", "env", "ls", "mv", "chmod", "touch", "head", "tail", "tr", "sort", "uniq", "wc", "true", "false", "sleep", "id"} {
		bins = append(bins, "/usr/bin/"+tool)
	}
	files := append([]string{"/usr/lib/python" + pyVersion}, bins...)
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
	for name, target := range map[string]string{"bin": "usr/bin", "lib": "usr/lib", "lib64": "usr/lib64", "sbin": "usr/sbin", "usr/bin/sh": "bash", "usr/bin/python": "python" + pyVersion, "usr/bin/python3": "python" + pyVersion} {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"tmp", "etc", "root"} {
		os.MkdirAll(filepath.Join(root, d), 0o755)
	}
	tb := filepath.Join(root, "testbed")
	for _, args := range [][]string{{"clone", "-q", repoDir, tb}, {"-C", tb, "checkout", "-q", "--detach", commit}, {"-C", tb, "remote", "remove", "origin"}} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
	return root
}

// importImage imports the tree at root into the cache as a one-layer image
// named name with env in its config and /testbed its working directory.
func importImage(t *testing.T, c *envcache.Cache, root, name string, env ...string) {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
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
		rel, _ := filepath.Rel(root, p)
		h.Name, h.Uid, h.Gid, h.Uname, h.Gname = rel, 0, 0, "", ""
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
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		t.Fatal(err)
	}
	if img, err = mutate.Config(img, v1.Config{Env: append([]string{"PATH=/usr/bin:/bin"}, env...), WorkingDir: "/testbed"}); err != nil {
		t.Fatal(err)
	}
	if _, err := rootfs.Import(t.Context(), c.Store(), img, rootfs.ImportOptions{Names: []string{name}}); err != nil {
		t.Fatal(err)
	}
}
