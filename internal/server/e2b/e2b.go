package e2b

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/engine"
	"github.com/minisandbox/msb/internal/server/e2b/envd/filesystem/filesystemconnect"
	"github.com/minisandbox/msb/internal/server/e2b/envd/process/processconnect"
	"github.com/minisandbox/msb/internal/server/ingress"
)

// envdVersion is the envd version sandboxes report: the SDK picks its wire
// behaviour by it (0.5.7: octet-stream uploads, stdin, default user).
const envdVersion = "0.5.7"

// defaultTimeout is E2B's sandbox timeout when create gives none.
const defaultTimeout = 300 * time.Second

// Front is the E2B front end of one engine.
type Front struct {
	e     *engine.Engine
	token string
	log   *slog.Logger

	mu        sync.Mutex // guards boxes, owners and templates
	boxes     map[string]*box
	owners    map[string]string    // snapshot name -> the E2B sandbox it was taken of
	snapUsers map[string]string    // snapshot name -> that sandbox's default user (users.go)
	templates map[string]*template // by id (templates.go)
	rec       *records             // the records of templates and paused sandboxes (records.go)

	spare spares // the base template's sandbox started ahead (spare.go)

	// base is the root of the base template ("": the host's system
	// directories) and baseUser its default user ("": the sandbox's
	// own); UseBase sets them (base.go).
	base, baseUser string

	shutdownLimit time.Duration // the time a stopping Serve has to pause the running sandboxes (0: none; shutdown.go)
	inflight      gate          // the requests Serve serves

	proxy *ingress.Proxy // to sandboxes' ports (ingress.go); Serve's shutdown stops its WebSockets
}

// box is what E2B knows of a sandbox that msb does not: its template,
// metadata, access token, timeout and processes.
type box struct {
	id, template, token string
	user                string // the default user of its commands and file calls ("": the sandbox's own; users.go)
	metadata            map[string]string
	envs                map[string]string
	started             time.Time

	life  sync.Mutex // serializes pause and connect, so one resume starts one sandbox
	cycle lifecycle  // what its timeout does (lifecycle.go); set at create

	mu     sync.Mutex // guards the fields below
	sid    string     // the engine's sandbox: id at create, another after a resume
	paused string     // the snapshot a paused sandbox resumes from; "" when running
	// pause is what its last pause kept (pauseSnapshot): pauseProcesses,
	// or why files only; "" before any pause.
	pause string
	end   time.Time
	timer *time.Timer
	procs map[uint32]*proc
	next  uint32
	// pausing is closed when the pause being taken (holdProcs) is
	// over; nil when none is: no process starts meanwhile (launch).
	pausing chan struct{}
	// starting counts the Starts at work in the sandbox (beginStart):
	// a pause waits for them before its dump (awaitStarts).
	starting int
	// live counts its processes that have not ended (proc.live), so that
	// canPrime need not look at each kept one: a sandbox that ran
	// thousands of commands keeps them for endedKeep.
	live atomic.Int64
	// watchers are the sandbox's directory watchers by id; they end
	// when it closes or pauses.
	watchers map[string]*watcher
	samples  []metric // its figures, oldest first (metrics.go)
	primed   *primed  // the login shell of the next command, started ahead (primed.go); nil: none
	busy     int      // file operations in flight: no primed shell is made meanwhile
	// traffic is the traffic access token its URLs want (ingress.go);
	// "" when they are public. Set at create.
	traffic string
	// mask is the Host its servers see on requests to its URLs, with
	// ${PORT} for the port (maskRequestHost; ingress.go); "": the URL's.
	// Set at create.
	mask string
	// https are the ports whose servers speak HTTPS (httpsPorts;
	// ingress.go). Set at create.
	https []int
	// network and policy are what create asked for (update_network
	// changes policy), which a resume gives again (restore.go).
	network  string
	policy   *engine.NetPolicy
	instance string // the msb instance of a paused task sandbox ("": a raw one); set by pause
	// shutdownAt is when a daemon's shutdown paused b (shutdown.go); zero
	// when b runs or its client or timeout paused it.
	shutdownAt time.Time

	closed chan struct{} // closed when the sandbox is: ends its sampler

	logMu sync.Mutex // guards logs
	logs  []logEntry // what the front end did with it, oldest first (logs.go)
}

// engineID is the engine's id of b's sandbox and whether b is paused.
func (b *box) engineID() (string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sid, b.paused != ""
}

// isClosed says whether b was closed (killed, or reached its timeout).
// close cancels b's processes and closes b.closed under b.mu, so a process
// that sees its context end and then asks has its answer.
func (b *box) isClosed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-b.closed:
		return true
	default:
		return false
	}
}

// New makes the E2B front end of e; token is the API key clients send.
// Restore loads what an earlier daemon on e's cache recorded.
func New(e *engine.Engine, token string, log *slog.Logger) *Front {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	f := &Front{e: e, token: token, log: log, boxes: map[string]*box{}, owners: map[string]string{}, snapUsers: map[string]string{},
		templates: map[string]*template{}, rec: &records{dir: stateDir(e.Cache().Dir())}}
	f.proxy = ingress.New(f.dialSandbox, portError)
	return f
}

// Handler serves both planes: the REST control plane and, for requests with
// an E2b-Sandbox-Id header, the sandbox's envd.
func (f *Front) Handler() http.Handler {
	control := http.NewServeMux()
	control.HandleFunc("POST /sandboxes", f.create)
	control.HandleFunc("POST /v2/sandboxes", f.create)
	control.HandleFunc("GET /sandboxes", f.list)
	control.HandleFunc("GET /v2/sandboxes", f.list)
	control.HandleFunc("GET /sandboxes/{id}", f.get)
	control.HandleFunc("DELETE /sandboxes/{id}", f.kill)
	control.HandleFunc("POST /sandboxes/{id}/timeout", f.setTimeout)
	control.HandleFunc("POST /sandboxes/{id}/refreshes", f.refresh)
	control.HandleFunc("POST /sandboxes/{id}/pause", f.pause)
	control.HandleFunc("POST /sandboxes/{id}/resume", f.connect)
	control.HandleFunc("POST /sandboxes/{id}/connect", f.connect)
	control.HandleFunc("POST /v2/sandboxes/{id}/connect", f.connect)
	control.HandleFunc("POST /sandboxes/{id}/snapshots", f.snapshot)
	control.HandleFunc("GET /snapshots", f.snapshots)
	control.HandleFunc("DELETE /templates/{id}", f.deleteSnapshot)
	control.HandleFunc("POST /sandboxes/{id}/fork", f.fork)
	control.HandleFunc("GET /sandboxes/{id}/metrics", f.metrics)
	control.HandleFunc("GET /sandboxes/metrics", f.manyMetrics)
	control.HandleFunc("GET /sandboxes/{id}/logs", f.logs)
	control.HandleFunc("GET /v2/sandboxes/{id}/logs", f.logsV2)
	control.HandleFunc("POST /v3/templates", f.requestBuild)
	control.HandleFunc("GET /templates/{template}/files/{hash}", f.fileLink)
	control.HandleFunc("POST /v2/templates/{template}/builds/{build}", f.startBuild)
	control.HandleFunc("GET /templates/{template}/builds/{build}/status", f.buildStatus)
	control.HandleFunc("GET /templates/{template}/{what}", f.templateInfo) // aliases/{name} or {id}/tags
	control.HandleFunc("POST /templates/tags", f.assignTags)
	control.HandleFunc("DELETE /templates/tags", f.removeTags)
	control.HandleFunc("PUT /sandboxes/{id}/network", f.updateNetwork)
	control.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		apiError(w, api.CodeNotFound, "no route %s %s in msb's E2B API (see docs/e2b.md)", r.Method, r.URL.Path)
	})

	sandbox := http.NewServeMux()
	processPath, processHandler := processconnect.NewProcessHandler(&processService{f})
	sandbox.Handle(processPath, joinEnd(processHandler))
	sandbox.Handle(filesystemconnect.NewFilesystemHandler(&filesystemService{f: f}))
	sandbox.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	sandbox.HandleFunc("GET /envs", f.envs)
	sandbox.HandleFunc("GET /files", f.download)
	sandbox.HandleFunc("POST /files", f.upload)

	ports := newPorts(f)
	envd := f.envd(sandbox)

	uploads := http.NewServeMux()
	uploads.HandleFunc("PUT "+uploadPrefix+"{template}/{hash}", f.uploadFiles)

	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ports.route(w, r, envd) { // a sandbox URL: <port>-<id>.<domain>
			return
		}
		if strings.HasPrefix(r.URL.Path, uploadPrefix) { // the URL's token is the key
			uploads.ServeHTTP(w, r)
			return
		}
		if r.Header.Get("E2b-Sandbox-Id") != "" {
			envd.ServeHTTP(w, r)
			return
		}
		if signed(r) { // a signed file URL: its signature names the sandbox
			f.signedFiles(sandbox).ServeHTTP(w, r)
			return
		}
		if !f.apiKeyOK(r) {
			apiError(w, api.CodeUnauthorized, "wrong or missing API key: send the daemon's token as X-API-Key")
			return
		}
		control.ServeHTTP(w, r)
	})
}

// Serve answers on l until ctx ends; connections speak HTTP/1.1 or
// cleartext HTTP/2, or on a TLS listener (msb serve --tls-cert) HTTP/2 or
// HTTP/1.1 as ALPN settles. Once it has stopped answering it pauses the running
// sandboxes, if PauseAtShutdown asked it to (shutdown.go).
func (f *Front) Serve(ctx context.Context, l net.Listener) error {
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	p.SetHTTP2(true)
	srv := &http.Server{Handler: f.inflight.track(f.Handler()), Protocols: &p, ReadHeaderTimeout: 30 * time.Second,
		ErrorLog: slog.NewLogLogger(f.log.Handler(), slog.LevelDebug)}
	// WebSockets to sandboxes' ports are their traffic, not API calls:
	// Shutdown would neither wait for nor close them, and the pauses would
	// wait for their handlers (inflight) until the time ran out.
	srv.RegisterOnShutdown(f.proxy.Stop)
	ctx, cancel := context.WithCancel(ctx)
	defer f.startSpares(ctx)() // after cancel: a spare being made gives up
	defer cancel()
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if srv.Shutdown(sctx) != nil {
			srv.Close()
		}
	}()
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	<-stopped
	return f.shutdown()
}

type boxKey struct{}

// envd routes a sandbox-plane request to its sandbox, resuming a paused
// one with autoResume first: unknown ids get the 502 E2B's proxy
// answers, a wrong access token 401.
func (f *Front) envd(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("E2b-Sandbox-Id")
		b := f.routable(id)
		if b == nil {
			notRunning(w, id)
			return
		}
		switch {
		case signed(r) && signedBy(r, b.token):
			if expired(w, r) {
				return
			}
		case subtle.ConstantTimeCompare([]byte(r.Header.Get("X-Access-Token")), []byte(b.token)) != 1:
			apiError(w, api.CodeUnauthorized, "wrong or missing X-Access-Token for sandbox %s", id)
			return
		}
		if err := f.wake(r.Context(), b); err != nil {
			engineError(w, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), boxKey{}, b)))
	})
}

// sandboxOf is the engine's sandbox of a routed request.
func (f *Front) sandboxOf(ctx context.Context) (*box, *engine.Sandbox, error) {
	b, _ := ctx.Value(boxKey{}).(*box)
	if b == nil {
		return nil, nil, engine.ErrNotFound
	}
	sid, _ := b.engineID()
	sb, err := f.e.Sandbox(sid)
	return b, sb, err
}

func (f *Front) box(id string) *box {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.boxes[id]
}

func (f *Front) apiKeyOK(r *http.Request) bool {
	got := r.Header.Get("X-API-Key")
	if a := r.Header.Get("Authorization"); got == "" {
		got, _ = strings.CutPrefix(a, "Bearer ")
	}
	return f.token != "" && subtle.ConstantTimeCompare([]byte(got), []byte(f.token)) == 1
}

func newToken() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
