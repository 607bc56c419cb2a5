package tlslisten_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/server/tlslisten"
	"github.com/minisandbox/msb/internal/server/tlslisten/tlstest"
)

// serve serves, over k's TLS on loopback, a handler answering the
// protocol and server name the request came with; it returns the address.
func serve(t *testing.T, k *tlslisten.Keypair) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s", r.Proto, r.TLS.ServerName)
	})}
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(k.Listener(l)) }()
	t.Cleanup(func() { srv.Close(); <-done })
	return l.Addr().String()
}

// get fetches https://name/ from addr, verifying against ca: the answer
// and the serial number of the certificate the server showed.
func get(t *testing.T, ca *tlstest.CA, addr, name string) (string, int64) {
	t.Helper()
	tr := &http.Transport{TLSClientConfig: ca.ClientConfig(""), ForceAttemptHTTP2: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", addr)
		}}
	defer tr.CloseIdleConnections()
	res, err := (&http.Client{Transport: tr}).Get("https://" + name + "/")
	if err != nil {
		t.Fatalf("GET https://%s/ at %s: %v", name, addr, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return string(b), res.TLS.PeerCertificates[0].SerialNumber.Int64()
}

// TestKeypairServes: a wildcard certificate serves its names over HTTP/2,
// verified against the CA that signed it; a name it is not for fails.
func TestKeypairServes(t *testing.T) {
	ca := tlstest.NewCA(t)
	cert, key := ca.Issue(t, "*.msb.test", "msb.test")
	k, err := tlslisten.Load(cert, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := tlslisten.Names(k.Leaf()); got != "*.msb.test,msb.test" {
		t.Errorf("Names = %q", got)
	}
	addr := serve(t, k)
	for _, name := range []string{"msb.test", "8000-abc.msb.test"} {
		if got, _ := get(t, ca, addr, name); got != "HTTP/2.0 "+name {
			t.Errorf("https://%s/: %q, want HTTP/2.0 and the name sent", name, got)
		}
	}
	c, err := tls.Dial("tcp", addr, ca.ClientConfig("api.other.test"))
	if err == nil {
		c.Close()
		t.Fatal("a certificate for *.msb.test verified for api.other.test")
	}
}

// replace puts src at dst by a rename, as certificate tools do.
func replace(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	tmp := dst + ".new"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		t.Fatal(err)
	}
}

// TestKeypairReload: new files are served from the next handshake on; a
// pair that does not load (garbage, a key of another certificate) keeps
// the last good one.
func TestKeypairReload(t *testing.T) {
	ca := tlstest.NewCA(t)
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	c1, k1 := ca.Issue(t, "msb.test") // serial 2
	replace(t, c1, cert)
	replace(t, k1, key)
	k, err := tlslisten.Load(cert, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, k)
	if _, serial := get(t, ca, addr, "msb.test"); serial != 2 {
		t.Fatalf("serial %d served, want 2", serial)
	}
	c3, k3 := ca.Issue(t, "msb.test") // serial 3
	replace(t, c3, cert)
	replace(t, k3, key)
	if _, serial := get(t, ca, addr, "msb.test"); serial != 3 {
		t.Errorf("after the files were replaced: serial %d served, want 3", serial)
	}
	c4, _ := ca.Issue(t, "msb.test")
	replace(t, c4, cert) // its key is not key.pem's
	if _, serial := get(t, ca, addr, "msb.test"); serial != 3 {
		t.Errorf("after a certificate of another key: serial %d served, want 3 kept", serial)
	}
	if err := os.WriteFile(cert+".new", []byte("not PEM"), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Rename(cert+".new", cert)
	if _, serial := get(t, ca, addr, "msb.test"); serial != 3 {
		t.Errorf("after garbage: serial %d served, want 3 kept", serial)
	}
}

// TestLoadErrors: a mismatched pair, a file that is no certificate and a
// missing file are errors naming the files.
func TestLoadErrors(t *testing.T) {
	ca := tlstest.NewCA(t)
	c1, k1 := ca.Issue(t, "msb.test")
	_, k2 := ca.Issue(t, "msb.test")
	for _, tc := range []struct {
		name, cert, key string
		bad             bool
		want            string
	}{
		{"key of another certificate", c1, k2, true, "private key does not match public key"},
		{"the files swapped", k1, c1, true, "--tls-cert " + k1},
		{"no such file", filepath.Join(t.TempDir(), "nope.pem"), k1, false, "nope.pem"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tlslisten.Load(tc.cert, tc.key, nil)
			if err == nil || errors.Is(err, tlslisten.ErrBadPair) != tc.bad || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Load: %v; want an error saying %q (ErrBadPair: %v)", err, tc.want, tc.bad)
			}
		})
	}
}
