package e2b

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/server/tlslisten/tlstest"
)

// TestE2BHTTPSPorts: network.https_ports makes a sandbox URL's hop into
// the sandbox HTTPS, the server's certificate (from a CA nobody trusts)
// not verified; a port not listed stays plain; a TLS server on a port not
// listed and a plain one on a listed port are 502; envd's port cannot be
// listed (a 400, which the SDK raises as SandboxException).
func TestE2BHTTPSPorts(t *testing.T) {
	cert, key := tlstest.NewCA(t).Issue(t, "localhost")
	out := sdkScript(t, "sdk_https_ports.py", cert, key)
	var got struct {
		EnvdListed   any    `json:"envd_listed"`
		ID           string `json:"sandbox_id"`
		Host         string `json:"host"`
		HTTPS        []any  `json:"https"`
		HTTPSAgain   any    `json:"https_again"`
		Plain        []any  `json:"plain"`
		TLSNotListed []any  `json:"tls_not_listed"`
		PlainListed  []any  `json:"plain_listed"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("the SDK script printed %q: %v", out, err)
	}
	if e := fmt.Sprint(got.EnvdListed); !strings.HasPrefix(e, "[SandboxException 400: ") || !strings.Contains(e, "49983") {
		t.Errorf("a create with https_ports [49983]: %v, want the SDK's SandboxException of a 400 naming the port", e)
	}
	wantHTTPS := fmt.Sprintf("[200 map[host:%s path:/a/b?c=d tls:true]]", got.Host)
	if fmt.Sprint(got.HTTPS) != wantHTTPS {
		t.Errorf("GET /a/b?c=d at %s (port 8443, https_ports): %v, want %s", got.Host, got.HTTPS, wantHTTPS)
	}
	if got.HTTPSAgain != float64(200) {
		t.Errorf("a second request to port 8443: %v, want 200", got.HTTPSAgain)
	}
	if fmt.Sprint(got.Plain) != "[200 true]" {
		t.Errorf("port 8000, not in https_ports, plain http.server: %v, want 200 and the file", got.Plain)
	}
	for name, r := range map[string][]any{"a TLS server on port 8444, not in https_ports": got.TLSNotListed,
		"a plain server on port 8445, in https_ports": got.PlainListed} {
		if len(r) != 2 || r[0] != float64(502) {
			t.Errorf("%s: %v, want 502", name, r)
		}
	}
}
