package vmtest

import (
	"bufio"
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
)

// KernelEnv names a kernel image to boot instead of the newest one in /boot
// that has its modules in /lib/modules.
const KernelEnv = "MSB_TEST_VM_KERNEL"

// ScriptEnv is the kernel command line parameter that names the script.
// The kernel hands a parameter it does not know to init as an environment
// variable; IsGuest looks for it.
const ScriptEnv = "MSB_VM_SCRIPT"

// ShareEnv is the kernel command line parameter that names the shared
// directory (Options.Share).
const ShareEnv = "MSB_VM_SHARE"

// SystemdEnv is the kernel command line parameter that makes the guest boot
// systemd (Options.Systemd).
const SystemdEnv = "MSB_VM_SYSTEMD"

// SystemdBinary is the system manager a guest with Options.Systemd boots.
const SystemdBinary = "/lib/systemd/systemd"

// ExitMarker starts the console line on which the guest's init reports the
// script's exit status, just before it powers off.
const ExitMarker = "msb-vm-exit: "

// QEMU is the emulator Run starts.
const QEMU = "qemu-system-x86_64"

// ErrUnavailable means this host cannot boot the VM: no emulator, no kernel
// with its modules, or not an amd64 host.
var ErrUnavailable = errors.New("cannot boot a test VM here")

// Kernel is a kernel image and the directory of its modules.
type Kernel struct {
	Image   string // e.g. /boot/vmlinuz-6.1.0-57-amd64
	Modules string // e.g. /lib/modules/6.1.0-57-amd64
}

// Available checks that Run can boot a VM on this host and returns the
// kernel it would boot; the error says what to install.
func Available() (Kernel, error) {
	if runtime.GOARCH != "amd64" {
		return Kernel{}, fmt.Errorf("%w: the guest is x86_64 and this host is %s", ErrUnavailable, runtime.GOARCH)
	}
	if _, err := exec.LookPath(QEMU); err != nil {
		return Kernel{}, fmt.Errorf("%w: %s not found (apt-get install qemu-system-x86)", ErrUnavailable, QEMU)
	}
	return FindKernel()
}

// FindKernel returns the kernel named by KernelEnv, or else the newest
// /boot/vmlinuz-* whose modules are installed.
func FindKernel() (Kernel, error) {
	images, _ := filepath.Glob("/boot/vmlinuz-*")
	if env := os.Getenv(KernelEnv); env != "" {
		images = []string{env}
	}
	slices.SortFunc(images, func(a, b string) int { return compareRelease(b, a) })
	for _, img := range images {
		rel := strings.TrimPrefix(filepath.Base(img), "vmlinuz-")
		k := Kernel{Image: img, Modules: filepath.Join("/lib/modules", rel)}
		if _, err := os.Stat(filepath.Join(k.Modules, "modules.dep")); err != nil {
			continue
		}
		if f, err := os.Open(img); err == nil {
			f.Close()
			return k, nil
		}
	}
	return Kernel{}, fmt.Errorf("%w: no kernel image in /boot with its modules in /lib/modules "+
		"(apt-get install linux-image-amd64, or set %s to an image whose modules are in /lib/modules/<its release>)", ErrUnavailable, KernelEnv)
}

// compareRelease orders kernel image names by their release's numbers
// (6.1.0-57 after 6.1.0-9).
func compareRelease(a, b string) int {
	num := func(s string) []int {
		var out []int
		for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r < '0' || r > '9' }) {
			n, _ := strconv.Atoi(f)
			out = append(out, n)
		}
		return out
	}
	return slices.Compare(num(a), num(b))
}

// rootModules are what the guest loads to mount its root: the virtio PCI
// transport, 9p over it, and overlayfs. Their dependencies come first.
var rootModules = []string{"virtio_pci", "9pnet_virtio", "9p", "overlay"}

// moduleOrder returns the module files (relative to the modules dir) that
// load names, each after what it depends on, from modules.dep, whose lines
// are "path: dependency...", the deepest dependency last.
func moduleOrder(modulesDep io.Reader, names []string) ([]string, error) {
	deps := map[string][]string{} // module name -> its path, then its dependencies' paths
	sc := bufio.NewScanner(modulesDep)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		path, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		deps[moduleName(path)] = append([]string{path}, strings.Fields(rest)...)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading modules.dep: %w", err)
	}
	var order []string
	for _, n := range names {
		d, ok := deps[n]
		if !ok {
			return nil, fmt.Errorf("module %s is not in modules.dep (built into the kernel? then leave it out)", n)
		}
		for i := len(d) - 1; i >= 0; i-- {
			if !slices.Contains(order, d[i]) {
				order = append(order, d[i])
			}
		}
	}
	return order, nil
}

// moduleName is the name modprobe knows a module file by.
func moduleName(path string) string {
	return strings.ReplaceAll(strings.TrimSuffix(filepath.Base(path), ".ko"), "-", "_")
}

// writeInitramfsFile writes the guest's initramfs to the file path.
func writeInitramfsFile(path string, k Kernel, init string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	err = writeInitramfs(w, k, init)
	if err == nil {
		err = w.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// writeInitramfs writes the guest's initramfs to w: init, the root's
// modules (numbered in load order under /modules), the mount points init
// uses and a console node.
func writeInitramfs(w io.Writer, k Kernel, init string) error {
	dep, err := os.Open(filepath.Join(k.Modules, "modules.dep"))
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	defer dep.Close()
	mods, err := moduleOrder(dep, rootModules)
	if err != nil {
		return err
	}
	c := &cpioWriter{w: w}
	for _, d := range []string{"dev", "proc", "sys", "host", "rw", "newroot", "modules"} {
		c.dir(d)
	}
	c.charDev("dev/console", 5, 1)
	exe, err := os.ReadFile(init)
	if err != nil {
		return fmt.Errorf("reading the guest's init: %w", err)
	}
	if err := checkStatic(exe); err != nil {
		return fmt.Errorf("the guest's init %s: %w", init, err)
	}
	c.file("init", 0o755, exe)
	for i, m := range mods {
		b, err := os.ReadFile(filepath.Join(k.Modules, m))
		if err != nil {
			return fmt.Errorf("reading module: %w", err)
		}
		c.file(fmt.Sprintf("modules/%02d-%s", i, filepath.Base(m)), 0o644, b)
	}
	return c.close()
}

// checkStatic fails for an ELF program that needs a dynamic loader, which
// the initramfs does not have (a Go test binary built with cgo: build it
// with CGO_ENABLED=0, as make test does). Anything else is let through.
func checkStatic(exe []byte) error {
	f, err := elf.NewFile(bytes.NewReader(exe))
	if err != nil {
		return nil
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return errors.New("dynamically linked, and the initramfs has no loader: build it with CGO_ENABLED=0")
		}
	}
	return nil
}

// Options describe one boot.
type Options struct {
	Kernel Kernel
	// Init is the guest's init: a static binary whose main calls GuestMain
	// when IsGuest, such as the calling test binary (/proc/self/exe).
	Init string
	// Script is the host path of the shell script the guest runs as root;
	// the guest sees the host's files at the same paths, read-only.
	Script string
	// Share is a host directory the guest mounts at the same path,
	// writable, above its tmpfs: how a test under /tmp hands the guest its
	// files and gets results back.
	Share string
	// Systemd boots the host's systemd (SystemdBinary) as the guest's
	// system manager, in a target of its own (SystemdTarget) whose one
	// service runs the script, as root, with the console as its output.
	// The target pulls in only the script's service and what that asks
	// for (systemd-logind and the system bus, for login sessions); fstab
	// is not read (fstab=no: the host's disks are not the guest's).
	Systemd   bool
	MemoryMiB int // default 2048
	CPUs      int // default 2
	// Console, when set, gets the console's output as it comes.
	Console io.Writer
}

// Result is what one boot produced.
type Result struct {
	ExitCode int    // the script's exit status
	Console  []byte // everything the guest printed on its console
}

// Run boots a VM, runs opts.Script in it and returns once the guest has
// powered off; the end of ctx kills the VM. An error means the script's
// status never came: QEMU failed, the guest did not boot, or init failed.
func Run(ctx context.Context, opts Options) (Result, error) {
	if opts.MemoryMiB == 0 {
		opts.MemoryMiB = 2048
	}
	if opts.CPUs == 0 {
		opts.CPUs = 2
	}
	tmp, err := os.MkdirTemp("", "msb-vm-")
	if err != nil {
		return Result{}, err
	}
	defer os.RemoveAll(tmp)
	initrd := filepath.Join(tmp, "initramfs.cpio")
	if err := writeInitramfsFile(initrd, opts.Kernel, opts.Init); err != nil {
		return Result{}, fmt.Errorf("writing the initramfs: %w", err)
	}
	var console bytes.Buffer
	cmd := exec.CommandContext(ctx, QEMU, qemuArgs(opts, initrd)...)
	cmd.Stdout = &console
	if opts.Console != nil {
		cmd.Stdout = io.MultiWriter(&console, opts.Console)
	}
	cmd.Stderr = cmd.Stdout
	runErr := cmd.Run()
	res := Result{Console: console.Bytes()}
	code, ok := exitStatus(res.Console)
	if !ok {
		return res, fmt.Errorf("the guest ended without the script's status (%s: %v); console ends with:\n%s",
			QEMU, runErr, tail(res.Console, 3000))
	}
	res.ExitCode = code
	return res, nil
}

// qemuArgs: an x86_64 PC emulated by TCG on every host CPU asked for,
// without the default devices (so no network card), the serial port as
// the console, and the host's root shared read-only over virtio-9p. The
// kernel reboots at once on a panic, which -no-reboot turns into QEMU's
// exit.
func qemuArgs(opts Options, initrd string) []string {
	params := "console=ttyS0 quiet loglevel=3 panic=-1 " + ScriptEnv + "=" + opts.Script
	if opts.Share != "" {
		params += " " + ShareEnv + "=" + opts.Share
	}
	if opts.Systemd {
		params += " " + SystemdEnv + "=1 systemd.unit=" + SystemdTarget + " fstab=no systemd.show_status=error"
	}
	args := []string{
		"-accel", "tcg,thread=multi", "-cpu", "max", "-smp", strconv.Itoa(opts.CPUs), "-m", strconv.Itoa(opts.MemoryMiB),
		"-nodefaults", "-no-user-config", "-display", "none", "-no-reboot", "-serial", "stdio",
		"-kernel", opts.Kernel.Image, "-initrd", initrd,
		"-append", params,
		"-fsdev", "local,id=hostroot,path=/,security_model=passthrough,readonly=on,multidevs=remap",
		"-device", "virtio-9p-pci,fsdev=hostroot,mount_tag=" + hostTag,
	}
	if opts.Share != "" {
		args = append(args, "-fsdev", "local,id=share,path="+opts.Share+",security_model=passthrough,multidevs=remap",
			"-device", "virtio-9p-pci,fsdev=share,mount_tag="+shareTag)
	}
	return args
}

// The 9p mount tags of the host's root and of Options.Share.
const (
	hostTag  = "hostroot"
	shareTag = "share"
)

// exitStatus finds the last ExitMarker line of the console.
func exitStatus(console []byte) (int, bool) {
	i := bytes.LastIndex(console, []byte(ExitMarker))
	if i < 0 {
		return 0, false
	}
	line, _, _ := bytes.Cut(console[i+len(ExitMarker):], []byte("\n"))
	n, err := strconv.Atoi(strings.TrimSpace(string(line)))
	return n, err == nil
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
