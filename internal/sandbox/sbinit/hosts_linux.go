package sbinit

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/minisandbox/msb/internal/sandbox/wire"
	"golang.org/x/sys/unix"
)

// The sandbox's host name resolves, as in a container: a program that
// looks itself up (Java's InetAddress.getLocalHost, Python's
// socket.getfqdn, many test suites) finds it in /etc/hosts. The root's own
// /etc/hosts (the host's, read-only, under a host base; an image's) gets
// one more line, 127.0.1.1 and the name, in a file of the sandbox's own
// /dev tmpfs bound over it read-only and then unlinked (the bind keeps
// it): nothing lands in the sandbox's upper dir, so a build's layer, a
// snapshot or a diff never holds the random name. (A memfd cannot be the
// source of a bind: it is on no mount of this namespace.) A root without
// /etc/hosts, one that names the host already, or a caller's own bind of
// /etc/hosts is left as it is.

const hostsPath = "/etc/hosts"

// hostsFile binds the root's /etc/hosts extended with cfg.Hostname.
func hostsFile(root string, cfg *wire.Config) error {
	if cfg.Hostname == "" || boundByCaller(cfg, hostsPath) {
		return nil
	}
	base, ok, err := readIn(root, hostsPath)
	if err != nil || !ok || namesHost(base, cfg.Hostname) {
		return err
	}
	if base != "" && !strings.HasSuffix(base, "\n") {
		base += "\n"
	}
	src := filepath.Join(root, "dev", ".msb-hosts")
	if err := os.WriteFile(src, []byte(base+"127.0.1.1\t"+cfg.Hostname+"\n"), 0o644); err != nil {
		return fmt.Errorf("making /etc/hosts: %w", err)
	}
	defer os.Remove(src)
	if err := bindIn(root, src, hostsPath, false, true); err != nil {
		return fmt.Errorf("binding /etc/hosts: %w", err)
	}
	return nil
}

func boundByCaller(cfg *wire.Config, target string) bool {
	for _, b := range cfg.Binds {
		if b.Target == target {
			return true
		}
	}
	return false
}

// readIn reads a small regular file p of the root, resolved within it;
// ok is false when there is none.
func readIn(root, p string) (string, bool, error) {
	rootFd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", false, err
	}
	defer unix.Close(rootFd)
	f, err := openIn(rootFd, p, unix.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return "", false, nil
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return "", false, nil
	}
	b, err := io.ReadAll(io.LimitReader(f, 1<<20))
	if err != nil {
		return "", false, fmt.Errorf("reading %s: %w", p, err)
	}
	return string(b), true, nil
}

// namesHost reports whether a hosts file has a line for name.
func namesHost(hosts, name string) bool {
	for line := range strings.SplitSeq(hosts, "\n") {
		line, _, _ = strings.Cut(line, "#")
		fields := strings.Fields(line)
		for _, f := range fields[min(1, len(fields)):] {
			if f == name {
				return true
			}
		}
	}
	return false
}
