package vmtest

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// SystemdTarget is the unit a guest with Options.Systemd boots into.
const SystemdTarget = "msb-vm.target"

// The script's service, and the wrapper it runs: the script, then its exit
// status after ExitMarker on the console, then an immediate power-off.
const (
	scriptService = "msb-vm-script.service"
	scriptWrapper = "/etc/msb-vm-script.sh"
)

// bootSystemd writes the guest's target, its service and the wrapper into
// the guest's /etc (the overlay's tmpfs) and executes systemd as PID 1. It
// returns only when that exec fails. A boot that never reaches the target
// powers off after ten minutes (JobTimeoutAction), without the marker.
func bootSystemd(script string) error {
	wrapper := fmt.Sprintf("#!/bin/sh\nsh %q\ncode=$?\nprintf '\\n%s%%d\\n' \"$code\"\nsync\nexec systemctl --force --force poweroff\n", script, ExitMarker)
	target := fmt.Sprintf("[Unit]\nDescription=msb test VM\nRequires=%s\nAfter=%s\nAllowIsolate=yes\n"+
		"JobTimeoutSec=600\nJobTimeoutAction=poweroff-force\n", scriptService, scriptService)
	service := "[Unit]\nDescription=msb test VM script\n" +
		"Wants=dbus.socket systemd-logind.service systemd-user-sessions.service\n" +
		"After=dbus.socket systemd-logind.service systemd-user-sessions.service\n" +
		"[Service]\nType=oneshot\nExecStart=" + scriptWrapper + "\n" +
		"Environment=PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/usr/local/go/bin HOME=/root TERM=dumb\n" +
		"StandardInput=null\nStandardOutput=tty\nStandardError=inherit\nTTYPath=/dev/console\nTTYReset=no\nTTYVHangup=no\n"
	for _, f := range []struct {
		path, body string
		mode       os.FileMode
	}{
		{scriptWrapper, wrapper, 0o755},
		{filepath.Join("/etc/systemd/system", SystemdTarget), target, 0o644},
		{filepath.Join("/etc/systemd/system", scriptService), service, 0o644},
	} {
		if err := os.WriteFile(f.path, []byte(f.body), f.mode); err != nil {
			return err
		}
	}
	// The host's root may carry a container's mark (this machine's has
	// /.dockerenv); systemd would then take the guest for a container and
	// ignore the kernel's command line. The guest is a VM: the marks go.
	for _, mark := range []string{"/.dockerenv", "/run/.containerenv"} {
		if err := os.Remove(mark); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	return unix.Exec(SystemdBinary, []string{SystemdBinary, "--unit=" + SystemdTarget}, os.Environ())
}

// SystemdAvailable says what Options.Systemd lacks on this host, if
// anything: systemd itself, the system bus, PAM's systemd module and the
// user's session bus (apt-get install systemd dbus libpam-systemd
// dbus-user-session).
func SystemdAvailable() error {
	for _, p := range []string{SystemdBinary, "/lib/systemd/system/dbus.service", "/usr/lib/systemd/user/dbus.socket"} {
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("%w: %s is missing (apt-get install systemd dbus libpam-systemd dbus-user-session)", ErrUnavailable, p)
		}
	}
	if m, _ := filepath.Glob("/lib/*/security/pam_systemd.so"); len(m) == 0 {
		return fmt.Errorf("%w: pam_systemd.so is missing (apt-get install libpam-systemd)", ErrUnavailable)
	}
	return nil
}
