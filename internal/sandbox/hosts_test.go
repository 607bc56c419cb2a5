package sandbox

import (
	"os"
	"strings"
	"testing"
)

// testHostNameResolves: the sandbox's host name is in its /etc/hosts (as a
// container's is), so a program that looks up its IPv4 address finds
// 127.0.1.1; the file cannot be changed, and nothing of it lands in the
// upper dir. The lookup asks for IPv4 only: `getent hosts` asks for IPv6
// first, which the file does not give, and a host whose nsswitch.conf has
// glibc's myhostname module (libnss-myhostname, installed for the E2B
// tests) then answers with the sandbox's link-local eth0 address, as it
// would in a container of that root.
func testHostNameResolves(t *testing.T, rt *Runtime) {
	upper := t.TempDir()
	sb := create(t, rt, Config{HostBase: true, Hostname: "box-hosts", UpperDir: upper})
	if got := mustOK(t, sb, "getent ahostsv4 \"$(hostname)\""); strings.Fields(got)[0] != "127.0.1.1" {
		t.Fatalf("getent ahostsv4: %q", got)
	}
	if got := mustOK(t, sb, "grep -c localhost /etc/hosts"); got == "0\n" {
		t.Fatalf("the root's own lines are gone: %q", got)
	}
	if res := sh(t, sb, "echo '10.0.0.1 evil' >> /etc/hosts"); res.ExitCode == 0 {
		t.Fatal("/etc/hosts is writable")
	}
	if got := mustOK(t, sb, "grep -c box-hosts /etc/hosts"); got != "1\n" {
		t.Fatalf("box-hosts lines: %q", got)
	}
	if err := sb.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(upper + "/etc"); !os.IsNotExist(err) {
		t.Fatalf("upper dir holds etc/: %v", err)
	}
}
