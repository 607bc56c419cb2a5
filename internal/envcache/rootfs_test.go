package envcache

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/spec"
)

// TestRootfsBase imports a small root filesystem (bash, Debian's python3.11
// with its standard library and bundled wheels, and the libraries they
// link) as the base layer, builds an environment on it and runs the task
// with no host system dirs at all.
func TestRootfsBase(t *testing.T) {
	rootfs := makeRootfs(t)
	repo := makeRepo(t, 4, 64, 1)
	dir := filepath.Join(t.TempDir(), "cache")
	c := openCache(t, Options{Dir: dir, Runtime: testRuntime(t)})
	id, err := c.ImportRootfs(t.Context(), rootfs)
	if err != nil {
		t.Fatal(err)
	}
	c = openCache(t, Options{Dir: dir, Runtime: c.opts.Runtime, Base: RootfsRef})
	sp := spec.Spec{Repo: "demo/proj", Version: "1.0", Python: "3.11", Install: "python -c 'import zlib, json' && echo ok > " + VenvPath + "/built-on-rootfs"}
	p := prepare(t, c, repo.instance(0), sp)
	if p.HostBase || !strings.Contains(strings.Join(p.Layers, ":"), id.Hex()) {
		t.Fatalf("task is not on the rootfs layer: host base %v, layers %v", p.HostBase, p.Layers)
	}
	sb := sandboxOf(t, c.opts.Runtime, p)
	// Only bash builtins and the rootfs's python: the rootfs has no coreutils.
	out := sh(t, sb, "read -r x < "+VenvPath+"/built-on-rootfs; echo $x; echo /usr/bin/*; test -e /usr/bin/git && echo host-leak; cd /testbed && python hello.py")
	if !strings.HasPrefix(out, "ok\n/usr/bin/bash /usr/bin/python3 /usr/bin/python3.11 /usr/bin/sh\n") || strings.Contains(out, "host-leak") || !strings.HasSuffix(out, "hello") {
		t.Fatalf("got %q", out)
	}
}

// makeRootfs copies bash and python3.11 with what they need into a tree
// laid out like a merged-/usr Debian root.
func makeRootfs(t *testing.T) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "rootfs")
	files := []string{"/usr/bin/bash", "/usr/bin/python3.11", "/usr/lib/python3.11", "/usr/share/python-wheels"}
	libs := map[string]bool{}
	sos, _ := filepath.Glob("/usr/lib/python3.11/lib-dynload/*.so")
	for _, bin := range append([]string{"/usr/bin/bash", "/usr/bin/python3.11"}, sos...) {
		out, err := exec.Command("ldd", bin).Output()
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(out)) {
			if strings.HasPrefix(f, "/") {
				libs[f] = true
			}
		}
	}
	for l := range libs {
		files = append(files, l)
	}
	for _, f := range files {
		if _, err := os.Stat(f); err != nil {
			continue
		}
		src, err := filepath.EvalSymlinks(f)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(root, strings.TrimPrefix(f, "/"))
		if strings.HasPrefix(f, "/lib") { // merged /usr: /lib is usr/lib
			dst = filepath.Join(root, "usr", strings.TrimPrefix(f, "/"))
		}
		os.MkdirAll(filepath.Dir(dst), 0o755)
		if out, err := exec.Command("cp", "-a", src, dst).CombinedOutput(); err != nil {
			t.Fatalf("cp %s: %v: %s", src, err, out)
		}
	}
	for name, target := range map[string]string{"bin": "usr/bin", "lib": "usr/lib", "lib64": "usr/lib64", "sbin": "usr/sbin"} {
		os.Symlink(target, filepath.Join(root, name))
	}
	for name, target := range map[string]string{"usr/bin/python3": "python3.11", "usr/bin/sh": "bash"} {
		os.Symlink(target, filepath.Join(root, name))
	}
	for _, d := range []string{"etc", "tmp", "root", "usr/sbin"} {
		os.MkdirAll(filepath.Join(root, d), 0o755)
	}
	os.WriteFile(filepath.Join(root, "etc", "passwd"), []byte("root:x:0:0:root:/root:/bin/bash\n"), 0o644)
	return root
}
