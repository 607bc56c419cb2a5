package server

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/sandbox"
	"github.com/minisandbox/msb/internal/server/ingress"
)

// portMethods are the methods /v1/sandboxes/{id}/ports/{port}/ passes on.
var portMethods = []string{"GET", "POST", "PUT", "PATCH", "DELETE"}

// portRoutes are the routes to servers listening in a sandbox: a request
// to /v1/sandboxes/{id}/ports/{port}/{path...} goes to path on that port
// of the sandbox's loopback (package ingress), without the daemon's token.
// A request in flight counts as activity of the sandbox for its idle
// timeout, as an exec call does, and so do the bytes of a WebSocket.
func (s *Server) portRoutes() []route {
	var rs []route
	for _, m := range portMethods {
		rt := route{method: m, path: "/v1/sandboxes/{id}/ports/{port}/{path...}", op: "port" + m[:1] + strings.ToLower(m[1:]), tag: "ports",
			summary:  m + " path on a TCP port of the sandbox's loopback: the request goes on as it came (query, body, headers but the daemon's token) and the server's answer comes back as it gave it; WebSocket upgrades pass",
			respType: "application/octet-stream", status: 200, errors: []int{404, 410, 502}, h: s.portProxy}
		if m == "POST" || m == "PUT" || m == "PATCH" {
			rt.reqType = "application/octet-stream"
		}
		rs = append(rs, rt)
	}
	return rs
}

// portProxy hands the request to the sandbox's port.
func (s *Server) portProxy(w http.ResponseWriter, r *http.Request) (any, error) {
	port, err := strconv.Atoi(r.PathValue("port"))
	if err != nil || port < 1 || port > 65535 {
		return nil, badRequest("port %q: want a TCP port, 1-65535", r.PathValue("port"))
	}
	sb, err := s.sandbox(r)
	if err != nil {
		return nil, err
	}
	r.Header.Del("Authorization") // the daemon's token stays out of the sandbox
	r.Header.Del("X-API-Key")
	s.ports.Serve(w, r, ingress.Target{ID: sb.ID(), Port: port, Path: r.PathValue("path"), Hold: sb.Hold})
	return nil, nil
}

// dialPort connects to port of the engine's sandbox id.
func (s *Server) dialPort(ctx context.Context, id string, port int) (net.Conn, error) {
	sb, err := s.e.Sandbox(id)
	if err != nil {
		return nil, err
	}
	return sb.DialTCP(ctx, port)
}

// portError answers a request that did not reach its port: 502 when
// nothing listens there or the exchange failed, the engine's error (a
// sandbox closed meanwhile) as any route's.
func portError(w http.ResponseWriter, r *http.Request, t ingress.Target, err error) {
	switch {
	case errors.Is(err, sandbox.ErrRefused):
		err = errorf(http.StatusBadGateway, api.CodeUnavailable, "nothing listens on port %d in sandbox %s (connection refused)", t.Port, t.ID)
	case errors.Is(err, context.Canceled):
		return // the client went away
	default:
		var ae *apiError
		if !errors.As(err, &ae) && !isEngineError(err) {
			err = errorf(http.StatusBadGateway, api.CodeUnavailable, "proxying to port %d of sandbox %s: %v", t.Port, t.ID, err)
		}
	}
	writeError(w, r, err)
}

// isEngineError says whether err is one of the engine's kinds (not found,
// gone...) rather than a failed exchange with the server.
func isEngineError(err error) bool {
	_, code := classify(err)
	return code != api.CodeInternal
}
