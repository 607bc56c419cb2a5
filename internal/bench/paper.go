package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/minisandbox/msb/internal/envcache"
	"github.com/minisandbox/msb/internal/sandbox"
)

// paperMethod is the SWE-MiniSandbox mechanism as its code does it
// (sandbox_deployment.py): per task, a directory into which the gzip
// tarballs of the shared venv and of the instance's /testbed are
// extracted; a shell started by `unshare --mount` (here also --pid --fork,
// so that closing the task kills what it started) that binds the host's
// system dirs read-only and /dev into that directory and chroots into it;
// commands written to the shell's stdin; at the end the shell is ended and
// the directory removed with rm -rf. Both the extraction and the rm -rf
// are timed. GNU tar is used for the extraction (the paper's Python
// tarfile is slower), so the baseline is, if anything, flattered.
type paperMethod struct {
	wl       *workload
	tasks    string // where task dirs are made
	rootless bool
}

// paperScript runs in the new mount and PID namespaces: $0 is what the
// chroot runs, $1 the task dir, the rest the system dirs to bind (their mount points made by
// paperLayout); $MSB_PAPER_DEV_BIND is --bind (as the paper) or --rbind (a
// user namespace may only bind /dev with its submounts). Like the paper's
// `sh -c "mount ... && mount ... && exec chroot ..."`, it starts no process
// but one mount per mount and chroot: the paper makes its directories in
// Python (os.makedirs), so here Go makes them, and the host's symlinked
// system dirs (/bin -> usr/bin) become the same symlinks in the task dir.
const paperScript = `set -e
d=$1; shift
for x in "$@"; do mount --bind -o ro "$x" "$d$x"; done
mount $MSB_PAPER_DEV_BIND /dev "$d/dev"
mount -t proc proc "$d/proc"
exec chroot "$d" $0
`

// paperShell is what the paper's chroot runs: its shell ($0 of
// paperScript, split into words).
const paperShell = "/bin/bash --noprofile --norc"

// paperLayout makes in dir the mount points of the host's system dirs
// hostDirs and of /dev, /proc and /tmp, and the symlinks of those system
// dirs that are symlinks on the host; it returns the dirs to bind.
func paperLayout(dir string, hostDirs []string) ([]string, error) {
	var binds []string
	for _, x := range hostDirs {
		fi, err := os.Lstat(x)
		switch {
		case err != nil:
			continue // not on this host
		case fi.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(x)
			if err != nil {
				return nil, err
			}
			link := filepath.Join(dir, x)
			if have, _ := os.Readlink(link); have == target {
				continue // laid out before (a build's shell, then the task's)
			}
			if err := os.Symlink(target, link); err != nil {
				return nil, fmt.Errorf("making the task's %s: %w", x, err)
			}
		case fi.IsDir():
			if err := os.MkdirAll(filepath.Join(dir, x), 0o755); err != nil {
				return nil, fmt.Errorf("making the task's %s: %w", x, err)
			}
			binds = append(binds, x)
		}
	}
	for _, x := range []string{"/dev", "/proc", "/tmp"} {
		if err := os.MkdirAll(filepath.Join(dir, x), 0o755); err != nil {
			return nil, fmt.Errorf("making the task's %s: %w", x, err)
		}
	}
	return binds, nil
}

// paperTools are the host programs the mechanism runs.
var paperTools = []string{"tar", "gzip", "unshare", "mount", "chroot", "rm"}

func (m *paperMethod) name() string { return MethodPaper }

// files are the task's tarballs and the programs the mechanism runs.
func (m *paperMethod) files(_ context.Context, i int) ([]string, error) {
	fs := m.wl.paperTarballs(i)
	for _, t := range paperTools {
		if p, err := exec.LookPath(t); err == nil {
			fs = append(fs, p)
		}
	}
	return fs, nil
}

func (m *paperMethod) create(ctx context.Context, i int) (liveTask, error) {
	d, err := os.MkdirTemp(m.tasks, "task-")
	if err != nil {
		return nil, err
	}
	t := &paperTask{dir: d}
	for _, tgz := range m.wl.paperTarballs(i) {
		if out, err := exec.CommandContext(ctx, "tar", "-xzf", tgz, "-C", d).CombinedOutput(); err != nil {
			t.removeDir()
			return nil, fmt.Errorf("tar -xzf %s: %v: %s", tgz, err, strings.TrimSpace(string(out)))
		}
	}
	cmd, err := m.shellCommand(d, paperShell)
	if err == nil {
		t.sh, err = startPipeShell(cmd)
	}
	if err != nil {
		t.removeDir()
		return nil, err
	}
	return t, nil
}

// shellCommand lays out dir (paperLayout) and returns the command that
// binds the system dirs into it and runs prog (paperShell, or /bin/true
// for a whole-process run) in the chroot.
func (m *paperMethod) shellCommand(dir, prog string) (*exec.Cmd, error) {
	binds, err := paperLayout(dir, sandbox.DefaultHostDirs)
	if err != nil {
		return nil, err
	}
	args := []string{"--mount", "--pid", "--fork"}
	devBind := "--bind"
	if m.rootless {
		args = append([]string{"--map-root-user"}, args...)
		devBind = "--rbind"
	}
	args = append(args, "sh", "-c", paperScript, prog, dir)
	args = append(args, binds...)
	cmd := exec.Command("unshare", args...)
	cmd.Env = append(taskEnv(), "MSB_PAPER_DEV_BIND="+devBind)
	return cmd, nil
}

// taskEnv is the environment of a baseline's shell: the venv first on
// PATH, as in msb's tasks.
func taskEnv() []string {
	return []string{"PATH=" + envcache.VenvPath + "/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"VIRTUAL_ENV=" + envcache.VenvPath, "HOME=/root", "LANG=C.UTF-8", "TERM=dumb"}
}

type paperTask struct {
	dir string
	sh  *pipeShell
}

func (t *paperTask) run(ctx context.Context, command string) error { return t.sh.run(ctx, command) }

// close ends the shell (with it the namespaces and their mounts) and then
// removes the task dir from the host's mount namespace, where the binds
// never existed.
func (t *paperTask) close() error {
	return errors.Join(t.sh.close(), t.removeDir())
}

func (t *paperTask) removeDir() error {
	if out, err := exec.Command("rm", "-rf", t.dir).CombinedOutput(); err != nil {
		return fmt.Errorf("rm -rf %s: %v: %s", t.dir, err, strings.TrimSpace(string(out)))
	}
	return nil
}

func (t *paperTask) pids() []int { return []int{t.sh.pid()} }

func (t *paperTask) dirs(context.Context) ([]string, error) { return []string{t.dir}, nil }

// paperTarball writes a gzip tarball of member (a path relative to dir),
// as the paper caches its venv and testbed.
func paperTarball(dst, dir, member string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	tmp := dst + ".tmp"
	if out, err := exec.Command("tar", "-czf", tmp, "-C", dir, member).CombinedOutput(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("tar -czf %s: %v: %s", dst, err, strings.TrimSpace(string(out)))
	}
	return os.Rename(tmp, dst)
}
