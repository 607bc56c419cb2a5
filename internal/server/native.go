package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/engine"
)

var modeRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(modePattern) })

func (s *Server) health(w http.ResponseWriter, r *http.Request) (any, error) {
	h := api.Health{Status: "ok", Version: s.o.Version, Mode: s.e.Mode(), UptimeNs: int64(time.Since(s.start)),
		Sandboxes: len(s.e.Sandboxes(nil)), Enforcement: s.e.Enforcement(), Quota: s.e.Quota()}
	if s.closing.Load() {
		h.Status = "shutting_down"
	}
	h.Quota.MaxBodyBytes, h.Quota.MaxAdmissionWait = s.o.MaxBody, int64(s.o.MaxAdmissionWait)
	return h, nil
}

// instanceOf resolves a request's instance: an id, or an inline row that
// is added first.
func (s *Server) instanceOf(id string, row json.RawMessage) (string, error) {
	if len(row) == 0 || string(row) == "null" {
		return id, nil
	}
	d, err := s.e.AddRows([]json.RawMessage{row})
	if err != nil {
		return "", err
	}
	got := d.All[0].InstanceID
	if id != "" && id != got {
		return "", badRequest("instance_id %q and the inline instance's %q differ", id, got)
	}
	return got, nil
}

// admissionWait turns a request's admission_wait_ns into the engine's
// (negative: do not wait), capped by the daemon's maximum.
func (s *Server) admissionWait(ns int64) time.Duration {
	if ns <= 0 {
		return -1
	}
	return min(time.Duration(ns), s.o.MaxAdmissionWait)
}

func (s *Server) createSandbox(w http.ResponseWriter, r *http.Request) (any, error) {
	var req api.CreateSandboxRequest
	if err := decode(r, &req, false); err != nil {
		return nil, err
	}
	if req.LifetimeNs < 0 || req.IdleTimeoutNs < 0 || req.AdmissionWaitNs < 0 || req.MaxOutput < 0 || req.Warm < 0 {
		return nil, badRequest("lifetime_ns, idle_timeout_ns, admission_wait_ns, max_output and warm must not be negative")
	}
	if err := checkLimits("limits", req.Limits); err != nil {
		return nil, err
	}
	id, err := s.instanceOf(req.InstanceID, req.Instance)
	if err != nil {
		return nil, err
	}
	ereq := engine.SandboxRequest{InstanceID: id, Layers: req.Layers, HostBase: req.HostBase,
		Image: req.Image, Workdir: req.Workdir, Env: req.Env, Network: req.Network, Labels: req.Labels, Limits: req.Limits, MaxOutput: req.MaxOutput,
		Lifetime: time.Duration(req.LifetimeNs), IdleTimeout: time.Duration(req.IdleTimeoutNs), AdmissionWait: s.admissionWait(req.AdmissionWaitNs),
		Warm: req.Warm, Session: req.Session}
	if len(req.AllowOut) > 0 || len(req.DenyOut) > 0 {
		ereq.NetPolicy = &engine.NetPolicy{Allow: req.AllowOut, Deny: req.DenyOut}
	}
	if req.Count != 0 {
		return s.createBatch(r, ereq, req.Count)
	}
	start := time.Now()
	sb, err := s.e.CreateSandbox(r.Context(), ereq)
	if err != nil {
		return nil, err
	}
	s.metrics.created(time.Since(start))
	s.log.Info("sandbox created", "request_id", requestID(r), "sandbox", sb.ID(), "instance", id, "took", time.Since(start))
	return sb.Info(), nil
}

func (s *Server) listSandboxes(w http.ResponseWriter, r *http.Request) (any, error) {
	match := map[string]string{}
	for _, l := range r.URL.Query()["label"] {
		k, v, ok := strings.Cut(l, "=")
		if !ok || k == "" {
			return nil, badRequest("label %q: want key=value", l)
		}
		match[k] = v
	}
	return api.SandboxList{Sandboxes: s.e.Sandboxes(match)}, nil
}

func (s *Server) getSandbox(w http.ResponseWriter, r *http.Request) (any, error) {
	return s.e.SandboxInfo(r.PathValue("id"))
}

func (s *Server) deleteSandbox(w http.ResponseWriter, r *http.Request) (any, error) {
	s.rex.forget(r.PathValue("id"))
	return s.e.CloseSandbox(r.PathValue("id"))
}

func (s *Server) exec(w http.ResponseWriter, r *http.Request) (any, error) {
	var req api.ExecRequest
	if err := decode(r, &req, false); err != nil {
		return nil, err
	}
	return s.runExec(r.Context(), r, req)
}

func (s *Server) sessionExec(w http.ResponseWriter, r *http.Request) (any, error) {
	var req api.ExecRequest
	if err := decode(r, &req, false); err != nil {
		return nil, err
	}
	name := r.PathValue("name")
	if req.Session != "" && req.Session != name {
		return nil, badRequest("the body names session %q and the path %q", req.Session, name)
	}
	req.Session = name
	return s.runExec(r.Context(), r, req)
}

// runExec runs req and, should the client go away while a session's
// command runs, interrupts it so that the session does not stay busy.
func (s *Server) runExec(ctx context.Context, r *http.Request, req api.ExecRequest) (any, error) {
	sb, err := s.sandbox(r)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	res, err := sb.Exec(ctx, req)
	if ctx.Err() != nil && req.Session != "" {
		sb.InterruptSession(context.WithoutCancel(ctx), req.Session)
	}
	if err != nil {
		return nil, err
	}
	s.metrics.exec(req.Session != "", time.Since(start))
	return res, nil
}

func (s *Server) execStream(w http.ResponseWriter, r *http.Request) (any, error) {
	var req api.ExecRequest
	if err := decode(r, &req, false); err != nil {
		return nil, err
	}
	sb, err := s.sandbox(r)
	if err != nil {
		return nil, err
	}
	sse := strings.Contains(r.Header.Get("Accept"), "text/event-stream")
	if sse {
		w.Header().Set("Content-Type", "text/event-stream")
	} else {
		w.Header().Set("Content-Type", "application/x-ndjson")
	}
	w.Header().Set("Cache-Control", "no-cache")
	started := false
	send := func(ev api.ExecEvent) {
		if !started {
			w.WriteHeader(http.StatusOK)
			started = true
		}
		b, _ := json.Marshal(ev)
		if sse {
			io.WriteString(w, "event: "+ev.Type+"\ndata: ")
			w.Write(b)
			io.WriteString(w, "\n\n")
		} else {
			w.Write(append(b, '\n'))
		}
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
	start := time.Now()
	res, err := sb.ExecStream(r.Context(), req, send)
	if err != nil && !started {
		return nil, err // nothing sent yet: an ordinary error answer
	}
	if err != nil {
		_, code := classify(err)
		send(api.ExecEvent{Type: api.EventError, Error: &api.ErrorInfo{Code: code, Message: err.Error(), RequestID: requestID(r)}})
		return nil, nil
	}
	s.metrics.exec(false, time.Since(start))
	send(api.ExecEvent{Type: api.EventResult, Result: &res})
	return nil, nil
}

func (s *Server) listSessions(w http.ResponseWriter, r *http.Request) (any, error) {
	sb, err := s.sandbox(r)
	if err != nil {
		return nil, err
	}
	return api.SessionList{Sessions: sb.Info().Sessions}, nil
}

func (s *Server) createSession(w http.ResponseWriter, r *http.Request) (any, error) {
	var req api.SessionRequest
	if err := decode(r, &req, false); err != nil {
		return nil, err
	}
	sb, err := s.sandbox(r)
	if err != nil {
		return nil, err
	}
	if err := sb.OpenSession(r.Context(), req); err != nil {
		return nil, err
	}
	return api.SessionInfo{Name: req.Name}, nil
}

func (s *Server) interruptSession(w http.ResponseWriter, r *http.Request) (any, error) {
	sb, err := s.sandbox(r)
	if err != nil {
		return nil, err
	}
	ok, err := sb.InterruptSession(r.Context(), r.PathValue("name"))
	if err != nil {
		return nil, err
	}
	return api.InterruptResult{Interrupted: ok}, nil
}

func (s *Server) closeSession(w http.ResponseWriter, r *http.Request) (any, error) {
	sb, err := s.sandbox(r)
	if err != nil {
		return nil, err
	}
	if err := sb.CloseSession(r.Context(), r.PathValue("name")); err != nil {
		return nil, err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil, nil
}

// filePath is the request's path query: absolute, cleaned.
func filePath(r *http.Request) (string, error) {
	p := r.URL.Query().Get("path")
	if !path.IsAbs(p) {
		return "", badRequest("path %q: give an absolute path inside the sandbox", p)
	}
	return path.Clean(p), nil
}

func (s *Server) readFile(w http.ResponseWriter, r *http.Request) (any, error) {
	p, err := filePath(r)
	if err != nil {
		return nil, err
	}
	var limit int64
	if v := r.URL.Query().Get("max_bytes"); v != "" {
		if limit, err = strconv.ParseInt(v, 10, 64); err != nil || limit <= 0 {
			return nil, badRequest("max_bytes %q: want a positive number", v)
		}
	}
	sb, err := s.sandbox(r)
	if err != nil {
		return nil, err
	}
	b, err := sb.ReadFile(r.Context(), p, limit)
	if err != nil {
		return nil, err
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	w.Write(b)
	return nil, nil
}

func (s *Server) writeFile(w http.ResponseWriter, r *http.Request) (any, error) {
	p, err := filePath(r)
	if err != nil {
		return nil, err
	}
	mode := uint64(0o644)
	if v := r.URL.Query().Get("mode"); v != "" {
		if mode, err = strconv.ParseUint(v, 8, 32); err != nil || !modeRE().MatchString(v) {
			return nil, badRequest("mode %q: want an octal mode like 0644", v)
		}
	}
	b, err := readBody(r)
	if err != nil {
		return nil, err
	}
	sb, err := s.sandbox(r)
	if err != nil {
		return nil, err
	}
	if err := sb.WriteFile(r.Context(), p, b, uint32(mode)); err != nil {
		return nil, err
	}
	return api.FileWritten{Path: p, Bytes: int64(len(b))}, nil
}

func (s *Server) statFile(w http.ResponseWriter, r *http.Request) (any, error) {
	p, err := filePath(r)
	if err != nil {
		return nil, err
	}
	sb, err := s.sandbox(r)
	if err != nil {
		return nil, err
	}
	return sb.Stat(r.Context(), p)
}

func (s *Server) listFiles(w http.ResponseWriter, r *http.Request) (any, error) {
	p, err := filePath(r)
	if err != nil {
		return nil, err
	}
	sb, err := s.sandbox(r)
	if err != nil {
		return nil, err
	}
	ents, err := sb.ListDir(r.Context(), p)
	if err != nil {
		return nil, err
	}
	return api.FileList{Path: p, Entries: ents}, nil
}

func (s *Server) getTar(w http.ResponseWriter, r *http.Request) (any, error) {
	p, err := filePath(r)
	if err != nil {
		return nil, err
	}
	sb, err := s.sandbox(r)
	if err != nil {
		return nil, err
	}
	b, err := sb.GetTar(r.Context(), p)
	if err != nil {
		return nil, err
	}
	w.Header().Set("Content-Type", "application/x-tar")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	w.Write(b)
	return nil, nil
}

func (s *Server) putTar(w http.ResponseWriter, r *http.Request) (any, error) {
	p, err := filePath(r)
	if err != nil {
		return nil, err
	}
	b, err := readBody(r)
	if err != nil {
		return nil, err
	}
	if len(b) == 0 {
		return nil, badRequest("the body must be a tar archive")
	}
	sb, err := s.sandbox(r)
	if err != nil {
		return nil, err
	}
	if err := sb.PutTar(r.Context(), p, b); err != nil {
		return nil, err
	}
	return api.FileWritten{Path: p, Bytes: int64(len(b))}, nil
}

func (s *Server) diff(w http.ResponseWriter, r *http.Request) (any, error) {
	sb, err := s.sandbox(r)
	if err != nil {
		return nil, err
	}
	p, err := sb.Diff(r.Context())
	if err != nil {
		return nil, err
	}
	return api.Diff{Patch: p}, nil
}

func (s *Server) evaluate(w http.ResponseWriter, r *http.Request) (any, error) {
	var req api.EvaluateRequest
	if err := decode(r, &req, true); err != nil {
		return nil, err
	}
	sb, err := s.sandbox(r)
	if err != nil {
		return nil, err
	}
	res, art, err := sb.EvaluateRepeat(r.Context(), req.Model, req.Patch, req.Repeat)
	if err != nil {
		return nil, err
	}
	out := api.EvaluateResponse{Result: res}
	if req.Artifacts {
		out.Artifacts = &art
	}
	return out, nil
}

func (s *Server) loadDataset(w http.ResponseWriter, r *http.Request) (any, error) {
	var req api.LoadDatasetRequest
	if err := decode(r, &req, false); err != nil {
		return nil, err
	}
	if !path.IsAbs(req.Path) {
		return nil, badRequest("path %q: the dataset file on the daemon's host, an absolute path", req.Path)
	}
	if err := checkDatasetFile(req.Path); err != nil {
		return nil, err
	}
	d, err := s.e.LoadDataset(req.Path, datasetFilter(req), req.SkipBadRows)
	if err != nil {
		return nil, err
	}
	out := api.InstancesLoaded{InstanceIDs: []string{}, RowErrors: []string{}}
	for _, in := range d.Selected {
		out.InstanceIDs = append(out.InstanceIDs, in.InstanceID)
	}
	for _, re := range d.RowErrors {
		out.RowErrors = append(out.RowErrors, re.Error())
	}
	return out, nil
}

func (s *Server) addInstances(w http.ResponseWriter, r *http.Request) (any, error) {
	var req api.AddInstancesRequest
	if err := decode(r, &req, false); err != nil {
		return nil, err
	}
	d, err := s.e.AddRows(req.Rows)
	if err != nil {
		return nil, err
	}
	out := api.InstancesLoaded{InstanceIDs: []string{}, RowErrors: []string{}}
	for _, in := range d.All {
		out.InstanceIDs = append(out.InstanceIDs, in.InstanceID)
	}
	return out, nil
}

func (s *Server) listInstances(w http.ResponseWriter, r *http.Request) (any, error) {
	return api.InstanceList{InstanceIDs: s.e.InstanceIDs()}, nil
}

func (s *Server) getInstance(w http.ResponseWriter, r *http.Request) (any, error) {
	return s.e.InstanceInfo(r.PathValue("instance_id"))
}

func (s *Server) getInstanceLayers(w http.ResponseWriter, r *http.Request) (any, error) {
	return s.e.InstanceLayers(r.Context(), r.PathValue("instance_id"))
}

func (s *Server) reusable(w http.ResponseWriter, r *http.Request) (any, error) {
	var req api.ReuseRequest
	if err := decode(r, &req, false); err != nil {
		return nil, err
	}
	return s.e.Reuse(req)
}
