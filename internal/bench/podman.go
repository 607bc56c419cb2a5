package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/minisandbox/msb/internal/envcache"
	"golang.org/x/sys/unix"
)

// podman runs podman against the benchmark's own storage and
// configuration, never the host's: a graph root and run root under the
// work dir, and a containers.conf and storage.conf written there and
// passed through CONTAINERS_CONF and CONTAINERS_STORAGE_CONF.
type podman struct {
	dir     string // <work>/podman
	env     []string
	runtime string
	version string
}

// Image names. Each image carries the digest of the msb layer it was
// built from (label msb.layer), so a changed layer rebuilds it.
const (
	podmanBase  = "localhost/msb-bench/base:latest"
	labelLayer  = "msb.layer"
	podmanNames = "msb-bench-"
)

// podmanConfig is what podman needs on a host like the benchmark's: the
// OCI runtime (runc where cgroups are hybrid v1+v2, which crun refuses),
// cgroupfs (no systemd to ask), events in a file (no journald), and default
// ulimits within the caller's hard limits: podman's defaults (1048576 open
// files, 4194304 processes) are above them where CAP_SYS_RESOURCE is
// dropped, and the container's start fails in setrlimit; a process limit
// above kernel.pid_max fails there too.
func podmanConfig(runtime string) string {
	nproc := min(hardLimit(unix.RLIMIT_NPROC, 1<<22), pidMax())
	return fmt.Sprintf(`# written by msb bench
[containers]
default_ulimits = ["nofile=%d:%d", "nproc=%d:%d"]

[engine]
runtime = %q
cgroup_manager = "cgroupfs"
events_logger = "file"
`, hardLimit(unix.RLIMIT_NOFILE, 1<<20), hardLimit(unix.RLIMIT_NOFILE, 1<<20), nproc, nproc, runtime)
}

// pidMax is kernel.pid_max.
func pidMax() uint64 {
	b, err := os.ReadFile("/proc/sys/kernel/pid_max")
	if err != nil {
		return 1 << 22
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 1 << 22
	}
	return n
}

// hardLimit is the caller's hard limit of resource, at most def.
func hardLimit(resource int, def uint64) uint64 {
	var l unix.Rlimit
	if err := unix.Getrlimit(resource, &l); err != nil || l.Max > def {
		return def
	}
	return l.Max
}

// storageConfig keeps images and containers in dir with the overlay driver.
func storageConfig(dir string) string {
	return fmt.Sprintf(`# written by msb bench
[storage]
driver = "overlay"
graphroot = %q
runroot = %q
`, filepath.Join(dir, "root"), filepath.Join(dir, "run"))
}

// podmanRuntime picks the OCI runtime: crun refuses hybrid cgroup hosts
// (v1 controllers with a v2 mount beside them), runc does not.
func podmanRuntime() (string, error) {
	hybrid := false
	if _, err := os.Stat("/sys/fs/cgroup/unified/cgroup.controllers"); err == nil {
		hybrid = true
	}
	order := []string{"crun", "runc"}
	if hybrid {
		order = []string{"runc"}
	}
	for _, r := range order {
		if _, err := exec.LookPath(r); err == nil {
			return r, nil
		}
	}
	if hybrid {
		return "", fmt.Errorf("%w: podman needs runc on this hybrid cgroup v1+v2 host (crun refuses it): apt-get install runc", errSkipped)
	}
	return "", fmt.Errorf("%w: podman needs an OCI runtime: apt-get install crun (or runc)", errSkipped)
}

// newPodman writes the configuration under dir and checks that podman
// answers with it. It fails with errSkipped when podman is not installed.
func newPodman(ctx context.Context, dir string) (*podman, error) {
	if _, err := exec.LookPath("podman"); err != nil {
		return nil, fmt.Errorf("%w: podman is not installed (apt-get install podman runc; see docs/bench.md)", errSkipped)
	}
	rt, err := podmanRuntime()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	conf, storage := filepath.Join(dir, "containers.conf"), filepath.Join(dir, "storage.conf")
	if err := os.WriteFile(conf, []byte(podmanConfig(rt)), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(storage, []byte(storageConfig(dir)), 0o644); err != nil {
		return nil, err
	}
	p := &podman{dir: dir, runtime: rt, env: append(os.Environ(), "CONTAINERS_CONF="+conf, "CONTAINERS_STORAGE_CONF="+storage)}
	v, err := p.out(ctx, "version", "--format", "{{.Client.Version}}")
	if err != nil {
		return nil, err
	}
	p.version = v
	// Containers a killed benchmark left in this (private) storage.
	if _, err := p.out(ctx, "rm", "--all", "--force", "--time", "0"); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *podman) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "podman", args...)
	cmd.Env = p.env
	return cmd
}

// out runs podman and returns its trimmed stdout; the error carries stderr.
func (p *podman) out(ctx context.Context, args ...string) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd := p.command(ctx, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String() + stdout.String())
		if len(msg) > 600 {
			msg = "..." + msg[len(msg)-600:]
		}
		return "", &podmanError{args: args, err: err, msg: msg}
	}
	return strings.TrimSpace(stdout.String()), nil
}

type podmanError struct {
	args []string
	err  error
	msg  string
}

func (e *podmanError) Error() string {
	args := e.args
	if len(args) > 6 {
		args = append(args[:6:6], "...")
	}
	return fmt.Sprintf("podman %s: %v: %s", strings.Join(args, " "), e.err, e.msg)
}

func (e *podmanError) Unwrap() error { return e.err }

// imageLayer is the msb.layer label of image, "" when the image is missing.
func (p *podman) imageLayer(ctx context.Context, image string) string {
	v, err := p.out(ctx, "image", "inspect", "--format", "{{index .Labels \""+labelLayer+"\"}}", image)
	if err != nil {
		return ""
	}
	return v
}

// importBase makes the base image from a root filesystem directory (a
// debootstrap tree), leaving out apt's caches.
func (p *podman) importBase(ctx context.Context, rootfs string) error {
	tar := exec.CommandContext(ctx, "tar", "-C", rootfs, "--exclude=./var/cache/apt/archives", "--exclude=./var/lib/apt/lists", "-c", ".")
	imp := p.command(ctx, "import", "--change", "LABEL "+labelLayer+"=rootfs:"+rootfs, "-", podmanBase)
	pipe, err := tar.StdoutPipe()
	if err != nil {
		return err
	}
	var tarErr, impOut bytes.Buffer
	tar.Stderr = &tarErr
	imp.Stdin, imp.Stdout, imp.Stderr = pipe, &impOut, &impOut
	if err := tar.Start(); err != nil {
		return err
	}
	ierr := imp.Run()
	terr := tar.Wait()
	if terr != nil {
		return fmt.Errorf("tar of %s: %v: %s", rootfs, terr, tarErr.String())
	}
	if ierr != nil {
		return fmt.Errorf("podman import: %v: %s", ierr, impOut.String())
	}
	return nil
}

// build runs podman build of containerfile with context dir as image,
// labelled with layer. extra are more build flags (e.g. --network host).
func (p *podman) build(ctx context.Context, image, dir, containerfile, layer string, extra ...string) error {
	f, err := os.CreateTemp("", "msb-bench-containerfile-")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	f.WriteString(containerfile)
	f.Close()
	args := append([]string{"build", "--quiet", "--label", labelLayer + "=" + layer, "-f", f.Name(), "-t", image}, extra...)
	_, err = p.out(ctx, append(args, dir)...)
	return err
}

// envContainerfile adds the shared venv (from an msb env layer's tree)
// to the base image, with the same PATH as msb's tasks.
func envContainerfile(from string) string {
	return fmt.Sprintf("FROM %s\nCOPY %s %s\nENV PATH=%s/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin VIRTUAL_ENV=%s\nWORKDIR %s\n",
		from, strings.TrimPrefix(envcache.VenvPath, "/"), envcache.VenvPath, envcache.VenvPath, envcache.VenvPath, envcache.Testbed)
}

// instanceContainerfile adds an instance's /testbed (from an msb repo
// layer's tree) to the environment image.
func instanceContainerfile(from string) string {
	return fmt.Sprintf("FROM %s\nCOPY testbed %s\n", from, envcache.Testbed)
}

// imageDirs are the storage directories of the layers of images: what
// they take on disk.
func (p *podman) imageDirs(ctx context.Context, images ...string) ([]string, error) {
	var dirs []string
	for _, im := range images {
		v, err := p.out(ctx, "image", "inspect", "--format", "{{.GraphDriver.Data.UpperDir}}:{{.GraphDriver.Data.LowerDir}}", im)
		if err != nil {
			return nil, err
		}
		for _, d := range strings.Split(v, ":") {
			if d != "" && d != "<no value>" {
				dirs = append(dirs, filepath.Dir(d)) // .../overlay/<id>/diff → the layer's dir
			}
		}
	}
	return dirs, nil
}

// podmanMethod runs each task in a container of the workload's instance
// image: `podman run -d` of a shell, `podman rm -f` at the end. Commands
// run, as the SWE-bench harness runs them, in a new `podman exec ID bash -c`
// each; or, with session, in one shell kept in the container (`podman exec
// -i ID bash` on a pipe, as SWE-ReX keeps its shell in a container), each
// followed by a status line as the paper's shell is.
type podmanMethod struct {
	pm      *podman
	wl      *workload
	session bool
}

func (m *podmanMethod) name() string { return MethodPodman }

// files are the layers of the task's image and the programs podman runs.
func (m *podmanMethod) files(ctx context.Context, i int) ([]string, error) {
	fs, err := m.pm.imageDirs(ctx, m.wl.podmanImage(i))
	if err != nil {
		return nil, err
	}
	for _, t := range []string{"podman", "conmon", m.pm.runtime} {
		if p, err := exec.LookPath(t); err == nil {
			fs = append(fs, p)
		}
	}
	return fs, nil
}

func containerName() string {
	var b [6]byte
	rand.Read(b[:])
	return podmanNames + hex.EncodeToString(b[:])
}

func (m *podmanMethod) create(ctx context.Context, i int) (liveTask, error) {
	name := containerName()
	id, err := m.pm.out(ctx, "run", "--detach", "--interactive", "--network", "none", "--name", name, m.wl.podmanImage(i), "bash")
	if err != nil {
		// a failed run may leave the container created but not started
		m.pm.out(context.Background(), "rm", "--force", "--time", "0", name)
		return nil, err
	}
	t := &podmanTask{pm: m.pm, id: id}
	if m.session {
		cmd := m.pm.command(context.Background(), "exec", "--interactive", id, "bash", "--noprofile", "--norc")
		if t.sh, err = startPipeShell(cmd); err != nil {
			t.close()
			return nil, err
		}
	}
	return t, nil
}

type podmanTask struct {
	pm *podman
	id string
	sh *pipeShell // the kept shell, with podmanMethod.session

	once   sync.Once
	conmon int
}

func (t *podmanTask) run(ctx context.Context, command string) error {
	if t.sh != nil {
		return t.sh.run(ctx, command)
	}
	_, err := t.pm.out(ctx, "exec", t.id, "bash", "-c", command)
	var pe *podmanError
	var ee *exec.ExitError
	if errors.As(err, &pe) && errors.As(err, &ee) {
		return exitError(ee.ExitCode(), pe.msg)
	}
	return err
}

// close ends the kept shell, if any, and removes the container.
func (t *podmanTask) close() error {
	var err error
	if t.sh != nil {
		err = t.sh.close()
	}
	_, rerr := t.pm.out(context.Background(), "rm", "--force", "--time", "0", t.id)
	return errors.Join(err, rerr)
}

// dirs is the container's writable layer.
func (t *podmanTask) dirs(ctx context.Context) ([]string, error) {
	v, err := t.pm.out(ctx, "container", "inspect", "--format", "{{.GraphDriver.Data.UpperDir}}", t.id)
	if err != nil {
		return nil, err
	}
	return []string{filepath.Dir(v)}, nil
}

// pids is conmon, the per-container monitor whose child is the
// container's init (the shell), and the kept shell's podman exec.
func (t *podmanTask) pids() []int {
	t.once.Do(func() {
		v, err := t.pm.out(context.Background(), "inspect", "--format", "{{.State.ConmonPid}}", t.id)
		if err == nil {
			t.conmon, _ = strconv.Atoi(v)
		}
	})
	var pids []int
	if t.conmon != 0 {
		pids = append(pids, t.conmon)
	}
	if t.sh != nil {
		pids = append(pids, t.sh.pid())
	}
	return pids
}
