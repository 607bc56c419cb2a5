package server

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"reflect"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/engine"
	"github.com/minisandbox/msb/internal/server/ingress"
)

// Options configure a Server. Zero values pick the defaults.
type Options struct {
	Logger *slog.Logger
	// Token is what requests over TCP must present (Authorization: Bearer,
	// or X-API-Key on the SWE-ReX routes). Requests over a unix socket are
	// trusted. An empty token refuses every TCP request.
	Token string
	// MaxBody caps a request body (default 64 MiB).
	MaxBody int64
	// MaxAdmissionWait caps a request's admission_wait_ns (default 10m).
	MaxAdmissionWait time.Duration
	// OutDir is where batch jobs write the harness's files (default
	// logs/run_evaluation).
	OutDir string
	// StepTimeout bounds a gym step without its own timeout (default 10m).
	StepTimeout time.Duration
	// ShutdownGrace is how long requests in flight may finish at shutdown
	// (default 10s).
	ShutdownGrace time.Duration
	// RootSandbox, when set, is served with the SWE-ReX routes at the root
	// (msb serve --swerex).
	RootSandbox string
	// Version is reported by /v1/health.
	Version string
	// HeaderTimeout bounds the wait for a request's headers (default 30s).
	HeaderTimeout time.Duration
	// BodyIdleTimeout bounds each wait for more of a request body
	// (default 30s): a body announced and not sent is a 408.
	BodyIdleTimeout time.Duration
	// MaxConns bounds the connections open at once on each listener
	// (default 4096).
	MaxConns int
	// TLS, if not nil, is the configuration the TCP listeners speak
	// (msb serve --tls-cert; package tlslisten); unix sockets stay plain.
	TLS *tls.Config
}

func (o *Options) defaults() {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MaxBody <= 0 {
		o.MaxBody = 64 << 20
	}
	if o.MaxAdmissionWait <= 0 {
		o.MaxAdmissionWait = 10 * time.Minute
	}
	if o.OutDir == "" {
		o.OutDir = "logs/run_evaluation"
	}
	if o.StepTimeout <= 0 {
		o.StepTimeout = 10 * time.Minute
	}
	if o.ShutdownGrace <= 0 {
		o.ShutdownGrace = 10 * time.Second
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	if o.HeaderTimeout <= 0 {
		o.HeaderTimeout = 30 * time.Second
	}
	if o.BodyIdleTimeout <= 0 {
		o.BodyIdleTimeout = 30 * time.Second
	}
	if o.MaxConns <= 0 {
		o.MaxConns = 4096
	}
}

// Server serves one engine over HTTP.
type Server struct {
	e       *engine.Engine
	o       Options
	log     *slog.Logger
	start   time.Time
	handler http.Handler
	metrics *metrics
	jobs    *jobs
	rex     *rexState
	conns   *conns
	ports   *ingress.Proxy // /v1/sandboxes/{id}/ports/{port}/ (ports.go)

	closing atomic.Bool
	base    context.Context // ends at shutdown: jobs run under it
	cancel  context.CancelFunc
}

// New makes the server of e.
func New(e *engine.Engine, o Options) *Server {
	o.defaults()
	s := &Server{e: e, o: o, log: o.Logger, start: time.Now(), rex: newRexState(), conns: newConns()}
	s.base, s.cancel = context.WithCancel(context.Background())
	s.metrics = newMetrics(e)
	s.jobs = newJobs(s)
	s.ports = ingress.New(s.dialPort, portError)
	mux := http.NewServeMux()
	byPath := map[string]map[string]http.Handler{}
	var order []string
	for _, rt := range s.routes() {
		if byPath[rt.path] == nil {
			byPath[rt.path] = map[string]http.Handler{}
			order = append(order, rt.path)
		}
		byPath[rt.path][rt.method] = s.wrap(rt)
	}
	for _, p := range order {
		mux.Handle(p, methods(byPath[p]))
	}
	mux.Handle("/v1/openapi.json", methods(map[string]http.Handler{"GET": http.HandlerFunc(s.serveOpenAPI)}))
	mux.Handle("GET /metrics", s.metrics.handler())
	s.rexRoutes(mux, "/swerex/{id}", "")
	if o.RootSandbox != "" {
		s.rexRoutes(mux, "", o.RootSandbox)
	}
	mux.HandleFunc("/", s.notFound)
	s.handler = guardBody(s.authenticate(mux), o.BodyIdleTimeout)
	return s
}

type ctxKey int

const (
	trustedKey ctxKey = iota
	requestIDKey
)

// Serve answers on the listeners until ctx ends, then shuts down: new
// requests get 503 (health says shutting_down), requests in flight get
// ShutdownGrace to finish, jobs are cancelled (what they finished is
// kept). The caller closes the engine afterwards. Connections on a unix
// listener are trusted.
func (s *Server) Serve(ctx context.Context, listeners ...net.Listener) error {
	srv := &http.Server{Handler: s.handler, ReadHeaderTimeout: s.o.HeaderTimeout, IdleTimeout: 5 * time.Minute,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return s.conns.context(context.WithValue(ctx, trustedKey, isUnix(c)), c)
		},
		ConnState: s.conns.state,
		ErrorLog:  slog.NewLogLogger(s.log.Handler(), slog.LevelDebug)}
	errc := make(chan error, len(listeners))
	for _, l := range listeners {
		l = limitConns(l, s.o.MaxConns)
		if _, unix := l.Addr().(*net.UnixAddr); !unix && s.o.TLS != nil {
			l = tls.NewListener(l, s.o.TLS) // above the limit: http.Server wants the *tls.Conn itself for HTTP/2
		}
		go func() { errc <- srv.Serve(l) }()
	}
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	s.closing.Store(true)
	s.log.Info("shutting down", "grace", s.o.ShutdownGrace)
	// Shutdown closes the listeners and waits for connections to go idle:
	// one whose client stalls mid-request would hold it for the grace.
	srv.RegisterOnShutdown(s.ports.Stop) // WebSockets to sandboxes: Shutdown would neither wait for nor close them
	srv.RegisterOnShutdown(func() {
		if n := s.conns.endStalledReads(); n > 0 {
			s.log.Info("ended reads waiting for clients", "connections", n)
		}
	})
	sctx, cancel := context.WithTimeout(context.Background(), s.o.ShutdownGrace)
	defer cancel()
	serr := srv.Shutdown(sctx)
	s.cancel()
	s.jobs.wait()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	if errors.Is(serr, context.DeadlineExceeded) {
		srv.Close() // streams still open: cut them
		serr = nil
	}
	return errors.Join(err, serr)
}

// authenticate checks the token of requests on untrusted connections.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Request-ID")
		if id == "" {
			id = newRequestID()
		}
		w.Header().Set("X-Request-ID", id)
		r = r.WithContext(context.WithValue(r.Context(), requestIDKey, id))
		if trusted, _ := r.Context().Value(trustedKey).(bool); !trusted {
			if ok, missing := s.checkToken(r); !ok {
				if s.isRex(r) {
					s.rexUnauthorized(w, missing)
					return
				}
				writeError(w, r, errorf(http.StatusUnauthorized, api.CodeUnauthorized, "%s", map[bool]string{true: "no token: send Authorization: Bearer <token>", false: "wrong token"}[missing]))
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// checkToken compares the request's token with the server's in constant
// time; missing says there was none.
func (s *Server) checkToken(r *http.Request) (ok, missing bool) {
	got := r.Header.Get("X-API-Key")
	if a := r.Header.Get("Authorization"); got == "" && a != "" {
		got, _ = strings.CutPrefix(a, "Bearer ")
	}
	if got == "" {
		return false, true
	}
	if s.o.Token == "" {
		return false, false
	}
	return subtle.ConstantTimeCompare([]byte(got), []byte(s.o.Token)) == 1, false
}

func newRequestID() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func requestID(r *http.Request) string {
	id, _ := r.Context().Value(requestIDKey).(string)
	return id
}

// handler is a native route's function: it returns the body to answer with
// the route's status, or nil after answering itself.
type handler func(w http.ResponseWriter, r *http.Request) (any, error)

// wrap runs a route's handler with logging, metrics and the error shape.
func (s *Server) wrap(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		if s.closing.Load() && rt.path != "/v1/health" {
			writeError(rec, r, errShuttingDown)
		} else if rt.h != nil {
			r.Body = http.MaxBytesReader(rec, r.Body, s.o.MaxBody)
			body, err := rt.h(rec, r)
			switch {
			case err != nil && rec.wrote:
				s.log.Warn("error after the answer began", "request_id", requestID(r), "err", err)
			case err != nil:
				writeError(rec, r, err)
			case body != nil:
				writeJSON(rec, rt.status, body)
			}
		}
		d := time.Since(start)
		s.metrics.request(rt.method+" "+rt.path, rec.status, d)
		level := slog.LevelDebug
		if rec.status >= 500 {
			level = slog.LevelWarn
		}
		s.log.Log(r.Context(), level, "request", "request_id", requestID(r), "method", r.Method, "route", rt.path,
			"sandbox", r.PathValue("id"), "status", rec.status, "took", d)
	})
}

// methods dispatches on the method, answering 405 in the API's error shape.
func methods(by map[string]http.Handler) http.Handler {
	var allow []string
	for m := range by {
		allow = append(allow, m)
	}
	sort.Strings(allow)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, ok := by[r.Method]
		if !ok && r.Method == http.MethodHead {
			h, ok = by[http.MethodGet]
		}
		if !ok {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			writeError(w, r, errorf(http.StatusMethodNotAllowed, api.CodeMethodNotAllowed, "%s is not allowed on %s (allowed: %s)", r.Method, r.URL.Path, strings.Join(allow, ", ")))
			return
		}
		h.ServeHTTP(w, r)
	})
}

func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	if s.isRex(r) {
		writeJSON(w, http.StatusNotFound, map[string]string{"detail": "Not Found"})
		return
	}
	writeError(w, r, errorf(http.StatusNotFound, api.CodeNotFound, "no route %s %s (see /v1/openapi.json)", r.Method, r.URL.Path))
}

// statusRecorder remembers the status written.
type statusRecorder struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (r *statusRecorder) WriteHeader(code int) {
	if !r.wrote {
		r.status, r.wrote = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	r.wrote = true
	return r.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (a proxied
// WebSocket upgrade hijacks it).
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (r *statusRecorder) Flush() {
	r.wrote = true
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, fmt.Appendf(nil, `{"error":{"code":"internal","message":%q}}`, err.Error())
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// decode reads a JSON body into v; unknown fields are an error naming
// them, and so is an empty body unless optional.
func decode(r *http.Request, v any, optional bool) error {
	b, err := readBody(r)
	if err != nil {
		return err
	}
	trimmed := strings.TrimSpace(string(b))
	if len(trimmed) == 0 {
		if optional {
			return nil
		}
		return badRequest("the request needs a JSON body")
	}
	if trimmed[0] != '{' {
		return badRequest("the body must be a JSON object")
	}
	var generic any
	if err := json.Unmarshal(b, &generic); err != nil {
		return badRequest("decoding the body: %v", err)
	}
	if where := nullAt(generic, ""); where != "" {
		return badRequest("decoding the body: %s is null: leave the field out for its default", where)
	}
	if missing := missingField(generic, reflect.TypeOf(v), ""); missing != "" {
		return badRequest("decoding the body: %s is required", missing)
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return badRequest("decoding the body: %v", err)
	}
	if dec.More() {
		return badRequest("decoding the body: more than one JSON value")
	}
	return nil
}

// missingField names the first field of t (a struct, or a pointer, slice
// of them) without omitempty that the decoded JSON v lacks, or "".
func missingField(v any, t reflect.Type, at string) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Slice:
		if l, ok := v.([]any); ok && t.Elem().Kind() == reflect.Struct {
			for i, e := range l {
				if m := missingField(e, t.Elem(), fmt.Sprintf("%s[%d]", at, i)); m != "" {
					return m
				}
			}
		}
	case reflect.Struct:
		obj, ok := v.(map[string]any)
		if !ok || t == reflect.TypeOf(json.RawMessage{}) {
			return ""
		}
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			if !f.IsExported() || name == "-" || name == "" {
				continue
			}
			e, present := obj[name]
			if !present && !strings.Contains(opts, "omitempty") {
				return or(at+"."+name, name)
			}
			if present {
				if m := missingField(e, f.Type, at+"."+name); m != "" {
					return m
				}
			}
		}
	}
	return ""
}

// nullAt names the first null in v (a decoded JSON value) but those of
// model_patch (a prediction's patch that is None), or "".
func nullAt(v any, at string) string {
	switch t := v.(type) {
	case nil:
		return or(at, "the body")
	case map[string]any:
		for k, e := range t {
			if e == nil && k == "model_patch" {
				continue
			}
			if w := nullAt(e, at+"."+k); w != "" {
				return w
			}
		}
	case []any:
		for i, e := range t {
			if w := nullAt(e, fmt.Sprintf("%s[%d]", at, i)); w != "" {
				return w
			}
		}
	}
	return ""
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return strings.TrimPrefix(s, ".")
}

// sandbox is the live sandbox the request names.
func (s *Server) sandbox(r *http.Request) (*engine.Sandbox, error) {
	return s.e.Sandbox(r.PathValue("id"))
}
