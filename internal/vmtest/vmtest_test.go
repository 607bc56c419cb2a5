package vmtest

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/privtest"
)

// TestMain makes this test binary the guest's init when it boots as one.
func TestMain(m *testing.M) {
	if IsGuest() {
		GuestMain()
	}
	os.Exit(m.Run())
}

func TestModuleOrder(t *testing.T) {
	dep := strings.Join([]string{
		"kernel/fs/9p/9p.ko: kernel/net/9p/9pnet.ko kernel/fs/fscache/fscache.ko kernel/fs/netfs/netfs.ko",
		"kernel/net/9p/9pnet.ko:",
		"kernel/fs/netfs/netfs.ko:",
		"kernel/fs/fscache/fscache.ko: kernel/fs/netfs/netfs.ko",
		"kernel/net/9p/9pnet_virtio.ko: kernel/net/9p/9pnet.ko kernel/drivers/virtio/virtio.ko",
		"kernel/drivers/virtio/virtio.ko:",
		"kernel/fs/overlayfs/overlay.ko:",
	}, "\n")
	got, err := moduleOrder(strings.NewReader(dep), []string{"9pnet_virtio", "9p", "overlay"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"kernel/drivers/virtio/virtio.ko", "kernel/net/9p/9pnet.ko", "kernel/net/9p/9pnet_virtio.ko",
		"kernel/fs/netfs/netfs.ko", "kernel/fs/fscache/fscache.ko", "kernel/fs/9p/9p.ko", "kernel/fs/overlayfs/overlay.ko"}
	if !slices.Equal(got, want) {
		t.Errorf("order:\n got %v\nwant %v", got, want)
	}
	if _, err := moduleOrder(strings.NewReader(dep), []string{"ext4"}); err == nil || !strings.Contains(err.Error(), "ext4") {
		t.Errorf("a missing module: err %v, want one naming it", err)
	}
}

// TestInitramfs writes an initramfs for a kernel whose modules are made
// up and reads it back as the kernel would: every entry whole, in order,
// and the trailer last.
func TestInitramfs(t *testing.T) {
	mods := t.TempDir()
	files := map[string]string{
		"modules.dep": strings.Join([]string{
			"kernel/virtio.ko:", "kernel/virtio_pci.ko: kernel/virtio.ko", "kernel/9pnet.ko:",
			"kernel/9pnet_virtio.ko: kernel/9pnet.ko kernel/virtio.ko", "kernel/9p.ko: kernel/9pnet.ko", "kernel/overlay.ko:",
		}, "\n"),
		"kernel/virtio.ko": "virtio", "kernel/virtio_pci.ko": "virtio_pci", "kernel/9pnet.ko": "9pnet",
		"kernel/9pnet_virtio.ko": "9pnet_virtio", "kernel/9p.ko": strings.Repeat("9p", 5000), "kernel/overlay.ko": "overlay-odd",
		"init": "#!init",
	}
	for name, body := range files {
		p := filepath.Join(mods, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "initramfs.cpio")
	if err := writeInitramfsFile(path, Kernel{Modules: mods}, filepath.Join(mods, "init")); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	got := map[string]string{}
	for len(b) > 0 {
		if len(b) < 110 || string(b[:6]) != "070701" {
			t.Fatalf("no newc header at %q", b[:min(len(b), 16)])
		}
		field := func(i int) int {
			n, err := strconv.ParseUint(string(b[6+8*i:14+8*i]), 16, 32)
			if err != nil {
				t.Fatal(err)
			}
			return int(n)
		}
		size, namesize := field(6), field(11)
		name := string(b[110 : 110+namesize-1])
		data := (110 + namesize + 3) &^ 3
		got[name] = string(b[data : data+size])
		names = append(names, name)
		b = b[(data+size+3)&^3:]
	}
	if names[len(names)-1] != "TRAILER!!!" {
		t.Fatalf("entries %v: the trailer is not last", names)
	}
	want := []string{"modules/00-virtio.ko", "modules/01-virtio_pci.ko", "modules/02-9pnet.ko", "modules/03-9pnet_virtio.ko",
		"modules/04-9p.ko", "modules/05-overlay.ko"}
	var mods2 []string
	for _, n := range names {
		if strings.HasPrefix(n, "modules/") {
			mods2 = append(mods2, n)
		}
	}
	if !slices.Equal(mods2, want) {
		t.Errorf("modules %v, want %v", mods2, want)
	}
	if got["init"] != "#!init" || got["modules/04-9p.ko"] != files["kernel/9p.ko"] || got["modules/05-overlay.ko"] != "overlay-odd" {
		t.Errorf("contents differ: init %q, overlay %q", got["init"], got["modules/05-overlay.ko"])
	}
}

func TestCheckStatic(t *testing.T) {
	if err := checkStatic([]byte("#!/bin/sh\n")); err != nil {
		t.Errorf("a script: %v", err)
	}
	sh, err := os.ReadFile("/bin/sh") // Debian's dash: dynamically linked
	if err != nil {
		t.Fatal(err)
	}
	if err := checkStatic(sh); err == nil || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
		t.Errorf("/bin/sh: err %v, want one naming CGO_ENABLED=0", err)
	}
}

func TestExitStatus(t *testing.T) {
	for _, c := range []struct {
		console string
		code    int
		ok      bool
	}{
		{"boot\n" + ExitMarker + "0\n", 0, true},
		{"x\n" + ExitMarker + "3\r\n", 3, true},
		{ExitMarker + "1\n...\n" + ExitMarker + "42\n", 42, true},
		{"Kernel panic - not syncing\n", 0, false},
		{ExitMarker + "\n", 0, false},
	} {
		code, ok := exitStatus([]byte(c.console))
		if code != c.code || ok != c.ok {
			t.Errorf("exitStatus(%q) = %d, %v; want %d, %v", c.console, code, ok, c.code, c.ok)
		}
	}
}

func TestCompareRelease(t *testing.T) {
	imgs := []string{"/boot/vmlinuz-6.1.0-9-amd64", "/boot/vmlinuz-6.1.0-57-amd64", "/boot/vmlinuz-5.10.0-30-amd64"}
	slices.SortFunc(imgs, compareRelease)
	if imgs[2] != "/boot/vmlinuz-6.1.0-57-amd64" || imgs[0] != "/boot/vmlinuz-5.10.0-30-amd64" {
		t.Errorf("sorted: %v", imgs)
	}
}

// TestBoot boots the VM and checks what the package comment promises the
// script: root, a writable root over the host's files, tmpfs at /tmp, a
// cgroup v2 hierarchy with the memory and pids controllers, no network
// device, and its exit status back.
func TestBoot(t *testing.T) {
	privtest.RequireRoot(t)
	k, err := Available()
	if err != nil {
		privtest.Skip(t, "%v", err)
	}
	dir := t.TempDir()
	script := filepath.Join(dir, "check.sh")
	body := `set -eu
test "$(id -u)" = 0
grep -qw memory /sys/fs/cgroup/cgroup.controllers
grep -qw pids /sys/fs/cgroup/cgroup.controllers
test "$(stat -f -c %T /tmp)" = tmpfs
test -x /bin/bash
echo guest > /etc/msb-vm-written && test -f /etc/msb-vm-written
test "$(ls /sys/class/net)" = lo
echo "script ran on $(uname -r)" | tee ` + dir + `/out
exit 7
`
	if err := os.WriteFile(script, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := Run(ctx, Options{Kernel: k, Init: "/proc/self/exe", Script: script, Share: dir, MemoryMiB: 512, CPUs: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("console:\n%s", res.Console)
	if res.ExitCode != 7 || !strings.Contains(string(res.Console), "script ran on") {
		t.Errorf("exit %d, want 7 after the checks passed", res.ExitCode)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "out")); !strings.Contains(string(b), "script ran") {
		t.Errorf("the guest's file in the shared dir: %q", b)
	}
	if _, err := os.Stat("/etc/msb-vm-written"); err == nil {
		t.Errorf("the guest's write reached the host's /etc")
	}
}

// TestBootSystemd boots the VM with systemd as its system manager and checks
// what a login over ssh gets there: systemd is PID 1, and a PAM login
// session (runuser -l, through pam_systemd as sshd's session stack) puts the
// user's shell in a session scope of logind's, with the user's manager and
// its session bus started for it.
func TestBootSystemd(t *testing.T) {
	privtest.RequireRoot(t)
	k, err := Available()
	if err != nil {
		privtest.Skip(t, "%v", err)
	}
	if err := SystemdAvailable(); err != nil {
		privtest.Skip(t, "%v", err)
	}
	dir := t.TempDir()
	script := filepath.Join(dir, "check.sh")
	body := `set -eu
exec 2>&1
test "$(cat /proc/1/comm)" = systemd
id -u msbvmuser >/dev/null 2>&1 || useradd --create-home --shell /bin/bash msbvmuser
runuser -l msbvmuser -c 'cat /proc/self/cgroup; test -S "$XDG_RUNTIME_DIR/bus" && echo "session bus: $DBUS_SESSION_BUS_ADDRESS"' </dev/null
exit 7
`
	if err := os.WriteFile(script, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	res, err := Run(ctx, Options{Kernel: k, Init: "/proc/self/exe", Script: script, Share: dir, Systemd: true, MemoryMiB: 1024})
	t.Logf("console:\n%s", res.Console)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 7 {
		t.Errorf("exit %d, want 7 after the checks passed", res.ExitCode)
	}
	for _, want := range []string{"/user.slice/user-", "/session-", "session bus: unix:path=/run/user/"} {
		if !strings.Contains(string(res.Console), want) {
			t.Errorf("no %q in the console", want)
		}
	}
}

// TestStamped: every line gets one stamp, however the writes split it.
func TestStamped(t *testing.T) {
	var b strings.Builder
	w := Stamped(&b)
	for _, p := range []string{"boot", "ing\nsecond line\nthi", "rd\n", "\n"} {
		if n, err := w.Write([]byte(p)); n != len(p) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", p, n, err)
		}
	}
	got := regexp.MustCompile(`\[ *\d+\.\ds\] `).ReplaceAllString(b.String(), "<t>")
	if want := "<t>booting\n<t>second line\n<t>third\n<t>\n"; got != want {
		t.Errorf("stamped: %q, want %q", got, want)
	}
}
