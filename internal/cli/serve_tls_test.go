package cli

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/client"
	"github.com/minisandbox/msb/internal/server/tlslisten/tlstest"
)

// freePort is a loopback port nothing listened on a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// TestServeTLSFlags: msb serve --tls-cert/--tls-key serves --listen's TCP
// listener and --e2b's over https (HTTP/2 offered): the client verbs
// verify it against SSL_CERT_FILE's CA and refuse it without; a key that
// is not the certificate's, or one flag alone, is a usage error.
func TestServeTLSFlags(t *testing.T) {
	ca := tlstest.NewCA(t)
	cert, key := ca.Issue(t, "*.msb.test", "msb.test", "127.0.0.1")
	_, otherKey := ca.Issue(t, "msb.test")
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("tok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"--tls-cert", cert, "--tls-key", otherKey},
		{"--tls-cert", cert},
	} {
		r := msb(t, dir, nil, append([]string{"serve", "--listen", "127.0.0.1:" + freePort(t), "--token-file", tokenFile}, args...)...)
		if r.code != exitUsage || !strings.Contains(r.stderr, "--tls-") {
			t.Errorf("serve %v: %+v, want a usage error naming the flags", args, r)
		}
	}

	native, e2bAPI := "https://127.0.0.1:"+freePort(t), "https://127.0.0.1:"+freePort(t)
	c, _ := client.New(native, "tok")
	defer c.Close()
	c.TrustRoots(ca.Pool())
	up := func() bool { _, err := c.Health(context.Background()); return err == nil }
	t.Run("serve", func(t *testing.T) {
		startServe(t, up, nil, "--listen", strings.TrimPrefix(native, "https://"), "--e2b", strings.TrimPrefix(e2bAPI, "https://"),
			"--token-file", tokenFile, "--tls-cert", cert, "--tls-key", key)
		env := []string{"MSB_TOKEN=tok", "MSB_SOCKET=" + native}
		if r := msb(t, dir, append(env, "SSL_CERT_FILE="+ca.File), "sandbox", "ls"); r.code != 0 {
			t.Errorf("sandbox ls over https trusting the CA: %+v", r)
		}
		if r := msb(t, dir, append(env, "SSL_CERT_FILE="+filepath.Join(dir, "token")), "sandbox", "ls"); r.code == 0 || !strings.Contains(r.stderr, "certificate") {
			t.Errorf("sandbox ls over https not trusting the CA: %+v, want a certificate error", r)
		}
		tr := &http.Transport{TLSClientConfig: ca.ClientConfig(""), ForceAttemptHTTP2: true}
		defer tr.CloseIdleConnections()
		req, _ := http.NewRequest("GET", e2bAPI+"/sandboxes", nil)
		req.Header.Set("X-API-Key", "tok")
		res, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK || res.Proto != "HTTP/2.0" || strings.TrimSpace(string(b)) != "[]" {
			t.Errorf("GET %s/sandboxes: %d %s %q, want 200 [] over HTTP/2.0", e2bAPI, res.StatusCode, res.Proto, b)
		}
	})
}
