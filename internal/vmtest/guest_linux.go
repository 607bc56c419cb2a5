package vmtest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"time"

	"github.com/minisandbox/msb/internal/mount"
	"golang.org/x/sys/unix"
)

// IsGuest reports whether this process is a test VM's init.
func IsGuest() bool { return os.Getpid() == 1 && os.Getenv(ScriptEnv) != "" }

// GuestMain is the guest's init: it makes the root (see the package
// comment), runs the script as root with the console as its output, prints
// its exit status after ExitMarker and powers off. It never returns.
// With SystemdEnv set it hands the guest to systemd instead (bootSystemd),
// whose script service does the rest.
func GuestMain() {
	code := 255
	switch err := guestRoot(); {
	case err != nil:
		fmt.Fprintf(os.Stderr, "vm init: %v\n", err)
	case os.Getenv(SystemdEnv) == "1":
		err := bootSystemd(os.Getenv(ScriptEnv))
		fmt.Fprintf(os.Stderr, "vm init: booting systemd: %v\n", err)
	default:
		code = runScript(os.Getenv(ScriptEnv))
	}
	fmt.Printf("\n%s%d\n", ExitMarker, code)
	unix.Sync()
	unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
	select {}
}

// guestRoot makes the guest's root (see the package comment) and moves it
// to /.
func guestRoot() error {
	if err := kernelFilesystems(); err != nil {
		return err
	}
	if err := loadModules("/modules"); err != nil {
		return err
	}
	if err := newRoot("/newroot", os.Getenv(ShareEnv)); err != nil {
		return err
	}
	return switchRoot("/newroot")
}

// kernelFilesystems mounts /dev (with ptys and /dev/shm), /proc and /sys,
// and puts the console on stdout and stderr.
func kernelFilesystems() error {
	for _, m := range []struct{ fstype, dir string }{{"devtmpfs", "/dev"}, {"proc", "/proc"}, {"sysfs", "/sys"}} {
		if err := mnt(m.fstype, m.dir, m.fstype, 0, ""); err != nil {
			return err
		}
	}
	if err := devExtras("/dev"); err != nil {
		return err
	}
	if con, err := os.OpenFile("/dev/console", os.O_RDWR, 0); err == nil {
		for fd := 1; fd <= 2; fd++ {
			unix.Dup2(int(con.Fd()), fd)
		}
	}
	return nil
}

// newRoot mounts at dir the host's root, read-only over 9p, under an
// overlay whose upper dir is a tmpfs; a tmpfs of their own on /tmp,
// /var/tmp and /run; and share, when set, at its own path.
func newRoot(dir, share string) error {
	if err := mount9p(hostTag, "/host", unix.MS_RDONLY); err != nil {
		return err
	}
	if err := mnt("tmpfs", "/rw", "tmpfs", 0, "mode=755"); err != nil {
		return err
	}
	for _, d := range []string{"/rw/upper", "/rw/work"} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return err
		}
	}
	if err := mnt("overlay", dir, "overlay", 0, "lowerdir=/host,upperdir=/rw/upper,workdir=/rw/work"); err != nil {
		return err
	}
	for _, d := range []struct{ dir, mode string }{{"tmp", "1777"}, {"var/tmp", "1777"}, {"run", "755"}} {
		if err := mnt("tmpfs", filepath.Join(dir, d.dir), "tmpfs", 0, "mode="+d.mode); err != nil {
			return err
		}
	}
	if share == "" {
		return nil
	}
	if err := os.MkdirAll(dir+share, 0o755); err != nil {
		return err
	}
	return mount9p(shareTag, dir+share, 0)
}

// switchRoot moves /dev, /proc and /sys into dir, mounts cgroup2 alone on
// its /sys/fs/cgroup (every controller on it, as on a current systemd
// host) and makes dir the root.
func switchRoot(dir string) error {
	for _, d := range []string{"/dev", "/proc", "/sys"} {
		if err := mnt(d, dir+d, "", unix.MS_MOVE, ""); err != nil {
			return err
		}
	}
	if err := mnt("cgroup2", dir+"/sys/fs/cgroup", "cgroup2", 0, ""); err != nil {
		return err
	}
	if err := os.Chdir(dir); err != nil {
		return err
	}
	if err := mnt(".", "/", "", unix.MS_MOVE, ""); err != nil {
		return err
	}
	if err := unix.Chroot("."); err != nil {
		return fmt.Errorf("chroot to the new root: %w", err)
	}
	return os.Chdir("/")
}

// devExtras mounts what a system's /dev has besides the device nodes:
// ptys (/dev/pts, and /dev/ptmx where devtmpfs has none) and /dev/shm.
func devExtras(dev string) error {
	for _, d := range []string{"pts", "shm"} {
		if err := os.MkdirAll(filepath.Join(dev, d), 0o755); err != nil {
			return err
		}
	}
	if err := mnt("devpts", filepath.Join(dev, "pts"), "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "ptmxmode=0666,mode=0620"); err != nil {
		return err
	}
	if _, err := os.Lstat(filepath.Join(dev, "ptmx")); err != nil {
		if err := os.Symlink("pts/ptmx", filepath.Join(dev, "ptmx")); err != nil {
			return err
		}
	}
	return mnt("tmpfs", filepath.Join(dev, "shm"), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777")
}

// mnt performs one mount; its error names the call (package mount).
func mnt(src, dst, fstype string, flags uintptr, data string) error {
	return mount.Mount{Source: src, Target: dst, FSType: fstype, Flags: flags, Data: data}.Mount()
}

// loadModules loads the initramfs's modules in the order of their names.
func loadModules(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	for _, n := range names {
		f, err := os.Open(filepath.Join(dir, n))
		if err != nil {
			return err
		}
		err = unix.FinitModule(int(f.Fd()), "", 0)
		f.Close()
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("loading module %s: %w", n, err)
		}
	}
	return nil
}

// mount9p mounts the host directory exported as tag, waiting a little for
// its virtio device to show up.
func mount9p(tag, dst string, flags uintptr) error {
	var err error
	for i := 0; i < 50; i++ {
		if err = mnt(tag, dst, "9p", flags, "trans=virtio,version=9p2000.L,msize=512000,cache=loose"); err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return err
}

// runScript runs the script in a session of its own and reaps every
// process that ends up as init's child until the script itself exits.
func runScript(script string) int {
	null, err := os.Open("/dev/null")
	if err != nil {
		fmt.Fprintf(os.Stderr, "vm init: %v\n", err)
		return 255
	}
	env := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/usr/local/go/bin", "HOME=/root", "TERM=dumb"}
	pid, err := syscall.ForkExec("/bin/sh", []string{"sh", script}, &syscall.ProcAttr{
		Dir: "/", Env: env, Files: []uintptr{null.Fd(), 1, 2}, Sys: &syscall.SysProcAttr{Setsid: true},
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "vm init: starting %s: %v\n", script, err)
		return 255
	}
	for {
		var ws syscall.WaitStatus
		got, err := syscall.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "vm init: waiting for the script: %v\n", err)
			return 255
		}
		if got != pid {
			continue
		}
		if ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ws.ExitStatus()
	}
}
