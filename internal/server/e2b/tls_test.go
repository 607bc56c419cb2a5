package e2b

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"testing"

	"github.com/minisandbox/msb/internal/engine"
	"github.com/minisandbox/msb/internal/privtest"
	"github.com/minisandbox/msb/internal/server/tlslisten"
	"github.com/minisandbox/msb/internal/server/tlslisten/tlstest"
)

// startFrontTLS is startFront on a listener speaking TLS with a
// certificate for *.msb.test, msb.test, *.msb.localhost, msb.localhost
// and 127.0.0.1 from a CA made here,
// as msb serve --e2b --tls-cert serves it; it returns the https URL and
// the CA.
func startFrontTLS(t *testing.T) (string, *tlstest.CA) {
	t.Helper()
	ca := tlstest.NewCA(t)
	cert, key := ca.Issue(t, "*.msb.test", "msb.test", "*.msb.localhost", "msb.localhost", "127.0.0.1")
	keys, err := tlslisten.Load(cert, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.Open(context.Background(), engine.Config{StateDir: privtest.StateDir(t),
		Cache: engine.CacheConfig{Dir: filepath.Join(t.TempDir(), "cache")}})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- New(e, testKey, nil).Serve(ctx, keys.Listener(l)) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
		if err := e.Close(); err != nil {
			t.Error(err)
		}
	})
	return "https://" + l.Addr().String(), ca
}

// TestE2BTLS: the SDK over https, trusting the CA through SSL_CERT_FILE,
// creates a sandbox and runs a command; the URL of a port,
// https://8000-<id>.msb.test (E2B_DOMAIN msb.test), reaches the server in
// the sandbox with the certificate verified for that name, the server
// seeing X-Forwarded-Proto https; a name the certificate is not for fails;
// envd's port by name (the SDK's envd URL without E2B_SANDBOX_URL) answers.
func TestE2BTLS(t *testing.T) {
	url, ca := startFrontTLS(t)
	t.Setenv("SSL_CERT_FILE", ca.File)
	t.Setenv("E2B_DOMAIN", "msb.test")
	out := sdkScriptAt(t, url, "sdk_tls.py")
	var got struct {
		Echo      string `json:"echo"`
		Host      string `json:"host"`
		ID        string `json:"sandbox_id"`
		Port      []any  `json:"port"`
		OtherName []any  `json:"other_name"`
		Envd      []any  `json:"envd"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("the SDK script printed %q: %v", out, err)
	}
	if got.Echo != "over tls\n" {
		t.Errorf("commands.run over https printed %q", got.Echo)
	}
	if want := "8000-" + got.ID + ".msb.test"; got.Host != want {
		t.Fatalf("get_host(8000) = %q, want %q", got.Host, want)
	}
	_, port, _ := net.SplitHostPort(url[len("https://"):])
	if want := fmt.Sprintf("[200 map[host:%s:%s proto:https]]", got.Host, port); fmt.Sprint(got.Port) != want {
		t.Errorf("https://%s/ at the daemon: %v, want %s", got.Host, got.Port, want)
	}
	if len(got.OtherName) != 2 || got.OtherName[0] != "verify" {
		t.Errorf("a name outside the certificate: %v, want a verification error", got.OtherName)
	}
	if fmt.Sprint(got.Envd) != "[204 ]" {
		t.Errorf("https://49983-<id>.msb.test/health (envd by name): %v, want 204", got.Envd)
	}
}
