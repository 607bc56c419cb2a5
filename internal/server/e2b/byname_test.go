package e2b

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/privtest"
)

// byNameDomain is the domain of the sandbox URLs the by-name tests
// resolve: under .localhost, every name of which glibc's nss-myhostname
// resolves to loopback (docs/e2b.md, "Sandbox URLs").
const byNameDomain = "msb.localhost"

// needLocalhostNames skips t (fails it when strict) unless the system's
// resolver gives loopback addresses, and only those, for a name under
// byNameDomain, as it does with nss-myhostname in /etc/nsswitch.conf.
func needLocalhostNames(t *testing.T) {
	t.Helper()
	name := "8000-probe." + byNameDomain
	out, err := exec.Command("getent", "ahosts", name).Output()
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if err != nil || lines[0] == "" {
		privtest.Skip(t, "the system's resolver does not resolve %s (getent ahosts: %v): install libnss-myhostname "+
			"(Debian; .ci/deps), which adds myhostname to the hosts line of /etc/nsswitch.conf", name, err)
	}
	for _, l := range lines {
		if ip := net.ParseIP(strings.Fields(l)[0]); ip == nil || !ip.IsLoopback() {
			t.Fatalf("getent ahosts %s gave %q, not only loopback addresses", name, out)
		}
	}
}

// byNameResult is what sdk_byname.py prints.
type byNameResult struct {
	ID        string   `json:"sandbox_id"`
	EnvdURL   string   `json:"envd_url"`
	Echo      string   `json:"echo"`
	Host      string   `json:"host"`
	Addresses []string `json:"addresses"`
	Served    []any    `json:"served"`
	Unknown   []any    `json:"unknown"`
}

func (got byNameResult) check(t *testing.T, wantHost string) {
	t.Helper()
	if got.Echo != "by name\n" {
		t.Errorf("commands.run printed %q", got.Echo)
	}
	if got.Host != wantHost {
		t.Fatalf("get_host(8000) = %q, want %q", got.Host, wantHost)
	}
	for _, a := range got.Addresses {
		if ip := net.ParseIP(a); ip == nil || !ip.IsLoopback() {
			t.Errorf("getaddrinfo(%s) in the SDK's process gave %v, want loopback only", got.Host, got.Addresses)
			break
		}
	}
	if len(got.Addresses) == 0 {
		t.Errorf("getaddrinfo(%s) gave no address", got.Host)
	}
	if fmt.Sprint(got.Served) != "[200 hello by name]" {
		t.Errorf("GET /hello.txt at %s by name: %v, want 200 and the file", got.Host, got.Served)
	}
	if len(got.Unknown) != 2 || got.Unknown[0] != float64(502) || !strings.Contains(fmt.Sprint(got.Unknown[1]), "was not found") {
		t.Errorf("a URL naming no sandbox: %v, want E2B's 502 not found", got.Unknown)
	}
}

// TestE2BSandboxURLByName: the SDK at E2B_API_URL=http://api.msb.localhost:<port>
// (the API by name), E2B_DOMAIN msb.localhost; get_host(8000) names the
// port, and httpx fetches http://<that name>:<port>/hello.txt, resolved by
// the system's resolver (nss-myhostname) as any client would: no Host
// header or address given by hand.
func TestE2BSandboxURLByName(t *testing.T) {
	needLocalhostNames(t)
	url := startFront(t)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(url, "http://"))
	api := "http://api." + byNameDomain + ":" + port
	out := sdkScriptEnv(t, []string{"E2B_API_URL=" + api, "E2B_SANDBOX_URL=" + api, "E2B_DOMAIN=" + byNameDomain},
		"sdk_byname.py", "urls", port)
	var got byNameResult
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("the SDK script printed %q: %v", out, err)
	}
	got.check(t, "8000-"+got.ID+"."+byNameDomain)
}

// TestE2BDomainOnly: a daemon serving TLS, and the SDK given nothing but
// E2B_DOMAIN (msb.localhost:<port>), the API key and the CA
// (SSL_CERT_FILE), as a user of E2B's cloud gives it: the SDK reaches the
// API at https://api.msb.localhost:<port>, envd at
// https://49983-<id>.msb.localhost:<port> and the port's URL
// https://8000-<id>.msb.localhost:<port> through the system's resolver,
// the certificate verified for each name. The port rides in the domain,
// which the SDK puts after each name; on port 443 the domain is the name
// alone.
func TestE2BDomainOnly(t *testing.T) {
	needLocalhostNames(t)
	url, ca := startFrontTLS(t)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(url, "https://"))
	domain := byNameDomain + ":" + port
	out := sdkScriptEnv(t, []string{"E2B_API_URL=", "E2B_SANDBOX_URL=", "E2B_DEBUG=", "E2B_DOMAIN=" + domain, "SSL_CERT_FILE=" + ca.File},
		"sdk_byname.py", "domain")
	var got byNameResult
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("the SDK script printed %q: %v", out, err)
	}
	got.check(t, "8000-"+got.ID+"."+domain)
	if want := "https://49983-" + got.ID + "." + domain; got.EnvdURL != want {
		t.Errorf("the SDK's envd URL is %q, want %q", got.EnvdURL, want)
	}
}

// nodeByName runs testdata/js/sdk_byname.mjs with the e2b npm SDK, env
// (KEY=VALUE) over the test's environment, and returns what it printed.
func nodeByName(t *testing.T, env []string, args ...string) byNameResult {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		privtest.Skip(t, "no node on PATH for the e2b npm SDK: %v", err)
	}
	if _, err := os.Stat(filepath.Join(nodeSDKDir, "node_modules", "e2b", "package.json")); err != nil {
		privtest.Skip(t, "the e2b npm SDK is not installed (make test-npm runs npm ci in %s): %v", nodeSDKDir, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{"sdk_byname.mjs"}, args...)...)
	cmd.Dir = nodeSDKDir
	cmd.Env = append(append(os.Environ(), "E2B_API_KEY="+testKey), env...)
	cmd.Stderr = &strings.Builder{}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("sdk_byname.mjs: %v\n%s%s", err, out, cmd.Stderr)
	}
	var got byNameResult
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("sdk_byname.mjs printed %q: %v", out, err)
	}
	return got
}

// TestE2BNodeSDKByName is TestE2BSandboxURLByName and TestE2BDomainOnly
// with the e2b npm SDK: Node's fetch resolves the names through
// getaddrinfo; in the domain mode Node trusts the CA through
// NODE_EXTRA_CA_CERTS.
func TestE2BNodeSDKByName(t *testing.T) {
	needLocalhostNames(t)
	t.Run("urls", func(t *testing.T) {
		url := startFront(t)
		_, port, _ := net.SplitHostPort(strings.TrimPrefix(url, "http://"))
		api := "http://api." + byNameDomain + ":" + port
		got := nodeByName(t, []string{"E2B_API_URL=" + api, "E2B_SANDBOX_URL=" + api, "E2B_DOMAIN=" + byNameDomain}, "urls", port)
		got.check(t, "8000-"+got.ID+"."+byNameDomain)
	})
	t.Run("domain", func(t *testing.T) {
		url, ca := startFrontTLS(t)
		_, port, _ := net.SplitHostPort(strings.TrimPrefix(url, "https://"))
		domain := byNameDomain + ":" + port
		got := nodeByName(t, []string{"E2B_API_URL=", "E2B_SANDBOX_URL=", "E2B_DEBUG=", "E2B_DOMAIN=" + domain, "NODE_EXTRA_CA_CERTS=" + ca.File}, "domain")
		got.check(t, "8000-"+got.ID+"."+domain)
		if want := "https://49983-" + got.ID + "." + domain; got.EnvdURL != want {
			t.Errorf("the SDK's envd URL is %q, want %q", got.EnvdURL, want)
		}
	})
}
