// Package ingress carries HTTP requests from the host to servers listening
// on a sandbox's ports: the E2B front end's sandbox URLs
// (<port>-<sandbox>.<domain>) and the native API's
// /v1/sandboxes/{id}/ports/{port}/ both hand a request to a Proxy.
//
// A Target names what a request goes to: a sandbox (by the engine's id)
// and a TCP port on its loopback. The Proxy is one reverse proxy for all
// targets, whose transport dials through the sandbox (engine.Sandbox.DialTCP:
// the sandbox's supervisor connects from inside its network namespace and
// passes the socket back), and keeps idle connections per target. The
// request goes on as it came (method, path, query, body, its Host header,
// which a server in the sandbox sees as the public name unless the
// Target's Host replaces it), with
// X-Forwarded-For/-Host/-Proto added; WebSocket and other upgrades pass
// through; responses stream as they come (server-sent events). A
// Target with TLS set speaks HTTPS to its server (E2B's https_ports): the
// client's TLS, if any, ends at the front end, and the hop into the
// sandbox is a TLS connection of its own that takes the server's
// certificate unverified (a self-signed one works) and sends no SNI, as a
// proxy dialing an address does.
//
// Activity: a Target's Hold, when set, marks its sandbox busy while a
// request is in flight (the native API's idle timeout counts it as it
// counts an exec call); an upgraded connection (a WebSocket) releases it
// once the upgrade is answered, and from then on only its bytes count
// (the engine's DialTCP connection marks each read and write that moves
// bytes), so a WebSocket left open and silent lets its sandbox go idle.
//
// Shutdown: a server's Shutdown does not wait for upgraded connections
// (they leave its books when hijacked) but their handlers run on; Stop
// closes them, so a daemon stopping does not wait on a sandbox's traffic.
package ingress

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Dialer connects to port on the loopback of the engine's sandbox id.
type Dialer func(ctx context.Context, id string, port int) (net.Conn, error)

// Target is where a proxied request goes: Port on the loopback of the
// engine's sandbox ID, at Path (with the request's query).
type Target struct {
	ID   string
	Port int
	Path string
	// Host, when set, is the Host header the sandbox's server sees in
	// place of the client's (E2B's maskRequestHost); X-Forwarded-Host
	// keeps the client's.
	Host string
	// TLS: the server on Port speaks HTTPS (E2B's https_ports).
	TLS bool
	// Hold, when set, marks the sandbox busy until the func it returns
	// runs: the Proxy calls it for each request and releases it at the
	// response's end, or at an upgrade's answer.
	Hold func() (release func())

	release func() // Hold's, once (Serve)
}

// targetHost is the transport's name of t, by which it dials and pools
// connections: "<id>.sandbox:<port>".
func (t Target) targetHost() string {
	return net.JoinHostPort(t.ID+hostSuffix, strconv.Itoa(t.Port))
}

const hostSuffix = ".sandbox"

// ErrorFunc answers a request whose target could not be reached (the
// dial's error, e.g. sandbox.ErrRefused) or whose exchange failed.
type ErrorFunc func(w http.ResponseWriter, r *http.Request, t Target, err error)

// Proxy is the reverse proxy to sandboxes' ports of one front end.
type Proxy struct {
	rp *httputil.ReverseProxy

	stopped context.Context // done once Stop ran: upgraded connections close
	stop    context.CancelFunc
}

type targetKey struct{}

// New makes a Proxy that dials with dial and answers failures with onError.
func New(dial Dialer, onError ErrorFunc) *Proxy {
	dialTarget := func(ctx context.Context, addr string) (net.Conn, error) {
		host, p, err := net.SplitHostPort(addr)
		id, ok := strings.CutSuffix(host, hostSuffix)
		port, perr := strconv.Atoi(p)
		if err != nil || !ok || perr != nil {
			return nil, fmt.Errorf("ingress: bad target address %q", addr)
		}
		return dial(ctx, id, port)
	}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			return dialTarget(ctx, addr)
		},
		// An https target (Target.TLS): HTTP/1.1 over TLS, the server's
		// certificate not verified, no SNI (the transport leaves HTTP/2
		// off with a DialTLSContext of its own).
		DialTLSContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			c, err := dialTarget(ctx, addr)
			if err != nil {
				return nil, err
			}
			tc := tls.Client(c, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}})
			if err := tc.HandshakeContext(ctx); err != nil {
				c.Close()
				return nil, fmt.Errorf("TLS to the server on the port: %w", err)
			}
			return tc, nil
		},
		MaxIdleConnsPerHost:   8,
		IdleConnTimeout:       30 * time.Second,
		ResponseHeaderTimeout: 0, // a server may think long; the client's end cancels
	}
	stopped, stop := context.WithCancel(context.Background())
	return &Proxy{stopped: stopped, stop: stop, rp: &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			t := pr.In.Context().Value(targetKey{}).(Target)
			pr.Out.URL.Scheme = "http"
			if t.TLS {
				pr.Out.URL.Scheme = "https"
			}
			pr.Out.URL.Host = t.targetHost()
			pr.Out.URL.Path, pr.Out.URL.RawPath = t.Path, ""
			pr.Out.Host = pr.In.Host // the name the client used, as E2B's proxy keeps it
			pr.SetXForwarded()
			if t.Host != "" {
				pr.Out.Host = t.Host
			}
		},
		ModifyResponse: func(res *http.Response) error {
			if res.StatusCode == http.StatusSwitchingProtocols {
				res.Request.Context().Value(targetKey{}).(Target).release()
			}
			return nil
		},
		Transport:     tr,
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			onError(w, r, r.Context().Value(targetKey{}).(Target), err)
		},
	}}
}

// Serve proxies r to t.
func (p *Proxy) Serve(w http.ResponseWriter, r *http.Request, t Target) {
	if t.Path == "" || t.Path[0] != '/' {
		t.Path = "/" + t.Path
	}
	t.release = func() {}
	if t.Hold != nil {
		t.release = sync.OnceFunc(t.Hold())
		defer t.release()
	}
	ctx := r.Context()
	if isUpgrade(r.Header) {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(p.stopped, cancel)()
	}
	p.rp.ServeHTTP(w, r.WithContext(context.WithValue(ctx, targetKey{}, t)))
}

// Stop closes the upgraded connections the proxy carries, now and from
// then on: a server shutting down calls it (http.Server.RegisterOnShutdown),
// as its Shutdown neither waits for nor closes them. Requests without an
// upgrade are left to the server's shutdown, which lets them finish.
func (p *Proxy) Stop() { p.stop() }

// isUpgrade says whether a request's header asks for a protocol upgrade
// (Connection: upgrade), as a WebSocket's handshake does.
func isUpgrade(h http.Header) bool {
	for _, v := range h["Connection"] {
		for _, tok := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(tok), "upgrade") {
				return true
			}
		}
	}
	return false
}

// ParseHost splits an E2B sandbox host name, "<port>-<sandbox>.<domain>"
// (with or without ":<port>" after it), into the port and the sandbox's
// id; ok is false for any other name. The domain is not checked: the
// sandbox's id, which names a live sandbox or none, decides.
func ParseHost(host string) (port int, id string, ok bool) {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	label, _, found := strings.Cut(host, ".")
	if !found {
		return 0, "", false
	}
	ps, id, found := strings.Cut(label, "-")
	if !found || id == "" || ps == "" || len(ps) > 5 {
		return 0, "", false
	}
	port, err := strconv.Atoi(ps)
	if err != nil || port < 1 || port > 65535 || ps[0] == '0' {
		return 0, "", false
	}
	return port, id, true
}
