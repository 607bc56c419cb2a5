// Package tlslisten serves msb serve's TCP listeners over TLS.
//
// A Keypair is a certificate file and its private key file (PEM, as
// --tls-cert and --tls-key name them). It is loaded and checked at start,
// and read again at the first handshake after either file changed (its
// size, modification time or inode: a rewrite, a rename over it, a moved
// symlink), so a renewed certificate is served without a restart. A new
// pair that does not load is logged and the old one kept.
//
// Listener wraps a net.Listener: each connection it accepts is a TLS
// server connection offering HTTP/2 and HTTP/1.1 by ALPN, which
// net/http's server then speaks.
package tlslisten

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrBadPair is the error of a certificate and key that do not make a
// keypair TLS can serve.
var ErrBadPair = errors.New("not a usable certificate and key")

// Keypair is a certificate and key file pair, reloaded when they change.
type Keypair struct {
	certFile, keyFile string
	log               *slog.Logger

	mu    sync.Mutex // guards cert and stamp
	cert  *tls.Certificate
	stamp [2]fileStamp // of certFile and keyFile when last read
}

// fileStamp tells whether a file changed since it was read.
type fileStamp struct {
	size  int64
	mtime time.Time
	ino   uint64
}

// Load reads the pair (which must match) and returns it; log (nil: none)
// gets the reloads and the failed ones.
func Load(certFile, keyFile string, log *slog.Logger) (*Keypair, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	k := &Keypair{certFile: certFile, keyFile: keyFile, log: log}
	stamp, err := k.stamps()
	if err != nil {
		return nil, err
	}
	cert, err := k.read()
	if err != nil {
		return nil, err
	}
	k.cert, k.stamp = cert, stamp
	return k, nil
}

// Leaf is the certificate served now.
func (k *Keypair) Leaf() *x509.Certificate {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.cert.Leaf
}

// Config is a server TLS configuration serving the pair (TLS 1.2 and up,
// HTTP/2 then HTTP/1.1 by ALPN).
func (k *Keypair) Config() *tls.Config {
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		NextProtos:     []string{"h2", "http/1.1"},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return k.current(), nil },
	}
}

// Listener wraps l: its connections speak TLS with the pair.
func (k *Keypair) Listener(l net.Listener) net.Listener {
	return tls.NewListener(l, k.Config())
}

// current is the certificate to serve, read again first if a file
// changed; a failed read keeps the old one.
func (k *Keypair) current() *tls.Certificate {
	k.mu.Lock()
	defer k.mu.Unlock()
	stamp, err := k.stamps()
	if err != nil || stamp == k.stamp {
		return k.cert // a file gone for a moment (a rename) keeps the old pair
	}
	k.stamp = stamp // a bad pair is logged once, not at every handshake
	cert, err := k.read()
	if err != nil {
		k.log.Error("TLS: keeping the certificate served so far", "err", err)
		return k.cert
	}
	k.cert = cert
	k.log.Info("TLS: certificate reloaded", "cert", k.certFile, "names", Names(cert.Leaf), "expires", cert.Leaf.NotAfter)
	return k.cert
}

// read loads and checks the pair.
func (k *Keypair) read() (*tls.Certificate, error) {
	cert, err := tls.LoadX509KeyPair(k.certFile, k.keyFile)
	if err != nil {
		return nil, fmt.Errorf("%w: --tls-cert %s and --tls-key %s: %w (want the PEM certificate, the server's first and then its intermediates, and the PEM private key of that first one)",
			ErrBadPair, k.certFile, k.keyFile, err)
	}
	// LoadX509KeyPair fills Leaf since Go 1.23 (x509keypairleaf).
	if cert.Leaf == nil {
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, fmt.Errorf("%w: --tls-cert %s: %w", ErrBadPair, k.certFile, err)
		}
	}
	return &cert, nil
}

// stamps stats both files.
func (k *Keypair) stamps() ([2]fileStamp, error) {
	var s [2]fileStamp
	for i, name := range []string{k.certFile, k.keyFile} {
		fi, err := os.Stat(name)
		if err != nil {
			return s, fmt.Errorf("%s: %w", [2]string{"--tls-cert", "--tls-key"}[i], err)
		}
		s[i] = fileStamp{size: fi.Size(), mtime: fi.ModTime()}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			s[i].ino = st.Ino
		}
	}
	return s, nil
}

// Names are the host names (and addresses) a certificate is for.
func Names(c *x509.Certificate) string {
	names := append([]string(nil), c.DNSNames...)
	for _, ip := range c.IPAddresses {
		names = append(names, ip.String())
	}
	if len(names) == 0 {
		names = append(names, c.Subject.CommonName)
	}
	return strings.Join(names, ",")
}
