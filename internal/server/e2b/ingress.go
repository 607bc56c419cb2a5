package e2b

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/minisandbox/msb/internal/sandbox"
	"github.com/minisandbox/msb/internal/server/ingress"
)

// envdPort is the port of envd in an E2B sandbox: a sandbox URL naming it
// goes to msb's envd, not to the sandbox.
const envdPort = 49983

// trafficHeader carries a sandbox's traffic access token, which a sandbox
// created with network.allowPublicTraffic false wants on every request to
// its URLs.
const trafficHeader = "E2b-Traffic-Access-Token"

// ports is the E2B ingress: a request whose Host is a sandbox URL,
// "<port>-<sandboxID>.<domain>" (the SDK's get_host), goes to that port of
// the sandbox, resuming a paused one with auto_resume first, as E2B's edge
// proxy routes by the Host header. Any domain is taken: the sandbox's id
// decides.
type ports struct {
	f     *Front
	proxy *ingress.Proxy
}

func newPorts(f *Front) *ports {
	return &ports{f: f, proxy: f.proxy}
}

// dialSandbox connects to port of the engine's sandbox sid.
func (f *Front) dialSandbox(ctx context.Context, sid string, port int) (net.Conn, error) {
	sb, err := f.e.Sandbox(sid)
	if err != nil {
		return nil, err
	}
	return sb.DialTCP(ctx, port)
}

// route reports whether r is for a sandbox URL and, if so, answers it.
// envd's port goes to envd (next), named by the header the SDK sends to
// E2B_SANDBOX_URL.
func (p *ports) route(w http.ResponseWriter, r *http.Request, envd http.Handler) bool {
	port, id, ok := ingress.ParseHost(r.Host)
	if !ok {
		return false
	}
	if port == envdPort {
		if r.Header.Get("E2b-Sandbox-Id") == "" {
			r.Header.Set("E2b-Sandbox-Id", id)
		}
		envd.ServeHTTP(w, r)
		return true
	}
	b := p.f.routable(id)
	if b == nil {
		notRunning(w, id)
		return true
	}
	if want := b.trafficToken(); want != "" {
		got := r.Header.Get(trafficHeader)
		if got == "" {
			trafficDenied(w, id, "Sandbox is secured with traffic access token. Token header 'e2b-traffic-access-token' is missing")
			return true
		}
		if subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
			trafficDenied(w, id, "Sandbox is secured with traffic access token. Token header 'e2b-traffic-access-token' is invalid")
			return true
		}
	}
	if err := p.f.wake(r.Context(), b); err != nil {
		engineError(w, err)
		return true
	}
	sid, _ := b.engineID()
	r.Header.Del(trafficHeader) // the sandbox's server does not see the token
	p.proxy.Serve(w, r, ingress.Target{ID: sid, Port: port, Path: r.URL.Path, Host: b.requestHost(port), TLS: b.httpsPort(port)})
	return true
}

// portError answers a request that did not reach its port as E2B's edge
// does: 502 naming the sandbox and the port when nothing listens there.
func portError(w http.ResponseWriter, r *http.Request, t ingress.Target, err error) {
	id := t.ID
	if port, e2bID, ok := ingress.ParseHost(r.Host); ok && port == t.Port {
		id = e2bID
	}
	msg := fmt.Sprintf("proxying to port %d of sandbox %s: %v", t.Port, id, err)
	if errors.Is(err, sandbox.ErrRefused) {
		msg = fmt.Sprintf("The sandbox %s is running but there is no service running on port %d", id, t.Port)
	}
	writeJSON(w, http.StatusBadGateway, map[string]any{"code": http.StatusBadGateway, "sandboxId": id, "port": t.Port, "message": msg})
}

// trafficDenied is the 403 E2B answers a request to a sandbox URL without
// the sandbox's traffic access token.
func trafficDenied(w http.ResponseWriter, id, msg string) {
	writeJSON(w, http.StatusForbidden, map[string]any{"code": http.StatusForbidden, "sandboxId": id, "message": msg})
}

// trafficToken is b's traffic access token; "" when its URLs are public.
func (b *box) trafficToken() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.traffic
}

// requestHost is the Host b's server on port sees in place of its URL's:
// maskRequestHost with each ${PORT} replaced by port, as E2B's edge
// rewrites it; "" (the URL's Host) without a mask.
func (b *box) requestHost(port int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.ReplaceAll(b.mask, "${PORT}", strconv.Itoa(port))
}

// maskOf is the maskRequestHost of a create's network rules ("": none).
func maskOf(n *networkRules) string {
	if n == nil || n.MaskRequestHost == nil {
		return ""
	}
	return *n.MaskRequestHost
}

// checkNetwork refuses the ingress rules of a create that no request
// could follow: a maskRequestHost that is no host name (with an optional
// :port) once ${PORT} is replaced, an httpsPorts entry that is no port or
// is envd's (which E2B refuses too).
func checkNetwork(n *networkRules) error {
	if n != nil {
		for _, p := range n.HTTPSPorts {
			if p < 1 || p > 65535 || p == envdPort {
				return fmt.Errorf("network.httpsPorts: %d is not a port a sandbox's server can serve HTTPS on (1 to 65535; the envd port %d cannot be listed)", p, envdPort)
			}
		}
	}
	m := maskOf(n)
	if m == "" {
		return nil
	}
	h := strings.ReplaceAll(m, "${PORT}", "80")
	if strings.IndexFunc(h, func(c rune) bool { return c <= ' ' || c >= 0x7f || strings.ContainsRune("/?#@\\\"", c) }) >= 0 {
		return fmt.Errorf("network.maskRequestHost %q: want a host name, optionally with :port, where ${PORT} stands for the sandbox URL's port", m)
	}
	return nil
}

// httpsPortsOf is the httpsPorts of a create's network rules, sorted and
// without repeats (nil: none).
func httpsPortsOf(n *networkRules) []int {
	if n == nil || len(n.HTTPSPorts) == 0 {
		return nil
	}
	return slices.Compact(slices.Sorted(slices.Values(n.HTTPSPorts)))
}

// httpsPort says whether b's server on port speaks HTTPS (httpsPorts).
func (b *box) httpsPort(port int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, found := slices.BinarySearch(b.https, port)
	return found
}

// trafficTokenOf is the traffic access token of a create's network rules:
// a new one when allowPublicTraffic is false, else none (public).
func trafficTokenOf(n *networkRules) string {
	if n == nil || n.AllowPublicTraffic == nil || *n.AllowPublicTraffic {
		return ""
	}
	return newToken()
}
