package server

import (
	"context"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/client"
	"github.com/minisandbox/msb/internal/engine"
	"github.com/minisandbox/msb/internal/privtest"
	"github.com/minisandbox/msb/internal/server/tlslisten"
	"github.com/minisandbox/msb/internal/server/tlslisten/tlstest"
)

// TestServeTLS: the native API over https, as msb serve --tls-cert serves
// its TCP listeners: the Go client, trusting only a CA made here, creates
// a sandbox on the host base and runs a command in it; a client that does
// not trust the CA is refused; the daemon offers HTTP/2.
func TestServeTLS(t *testing.T) {
	ca := tlstest.NewCA(t)
	cert, key := ca.Issue(t, "msb.test", "127.0.0.1")
	keys, err := tlslisten.Load(cert, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.Open(context.Background(), engine.Config{StateDir: privtest.StateDir(t),
		Cache: engine.CacheConfig{Dir: filepath.Join(t.TempDir(), "cache")}})
	if err != nil {
		t.Fatal(err)
	}
	l, err := Listen("127.0.0.1:0", -1)
	if err != nil {
		t.Fatal(err)
	}
	url := "https://" + l.Addr().(*net.TCPAddr).String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- New(e, Options{Token: testToken, ShutdownGrace: 5 * time.Second, TLS: keys.Config()}).Serve(ctx, l)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
		if err := e.Close(); err != nil {
			t.Error(err)
		}
	})

	untrusted, err := client.New(url, testToken)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := untrusted.Health(ctx); err == nil {
		t.Error("a client trusting only the system's roots accepted the test CA's certificate")
	}
	c, err := client.New(url, testToken)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.TrustRoots(ca.Pool())
	info, err := c.CreateSandbox(ctx, api.CreateSandboxRequest{HostBase: true})
	if err != nil {
		t.Fatalf("create over https: %v", err)
	}
	res, err := c.Exec(ctx, info.ID, api.ExecRequest{Command: "echo over tls"})
	if err != nil || res.Stdout != "over tls\n" || res.ExitCode != 0 {
		t.Errorf("exec over https: %+v %v, want over tls and 0", res, err)
	}
	if _, err := c.DeleteSandbox(ctx, info.ID); err != nil {
		t.Error(err)
	}

	tr := &http.Transport{TLSClientConfig: ca.ClientConfig(""), ForceAttemptHTTP2: true}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequest("GET", url+"/v1/health", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	r, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusOK || r.Proto != "HTTP/2.0" {
		t.Errorf("GET /v1/health with HTTP/2 offered: %d %s, want 200 over HTTP/2.0", r.StatusCode, r.Proto)
	}
}
