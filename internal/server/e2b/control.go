package e2b

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/engine"
)

// baseTemplate is the SDK's default template: for now a sandbox on the
// host's system directories (an msb-built Debian base comes with issue 27).
const baseTemplate = "base"

// createRequest is the body of POST /sandboxes and /v2/sandboxes; fields
// msb does not act on (autoPause, network, secure...) are ignored, as E2B
// ignores unknown ones.
type createRequest struct {
	TemplateID string            `json:"templateID"`
	Timeout    *int64            `json:"timeout"` // seconds
	Metadata   map[string]string `json:"metadata"`
	EnvVars    map[string]string `json:"envVars"`
}

func (f *Front) create(w http.ResponseWriter, r *http.Request) {
	var req createRequest
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err != nil {
		apiError(w, api.CodeBadRequest, "decoding the body: %v", err)
		return
	}
	timeout := defaultTimeout
	if req.Timeout != nil {
		if *req.Timeout <= 0 {
			apiError(w, api.CodeBadRequest, "timeout must be positive seconds, got %d", *req.Timeout)
			return
		}
		timeout = time.Duration(*req.Timeout) * time.Second
	}
	sr := engine.SandboxRequest{Lifetime: -1, IdleTimeout: -1, Labels: map[string]string{"e2b": "1"}}
	switch req.TemplateID {
	case "", baseTemplate:
		sr.HostBase = true
	default:
		if _, err := f.e.Instance(req.TemplateID); err != nil {
			apiError(w, api.CodeNotFound, "template '%s' not found: a template is an msb instance id or %q", req.TemplateID, baseTemplate)
			return
		}
		sr.InstanceID = req.TemplateID
	}
	for k, v := range req.EnvVars {
		sr.Env = append(sr.Env, k+"="+v)
	}
	sort.Strings(sr.Env)
	sb, err := f.e.CreateSandbox(r.Context(), sr)
	if err != nil {
		engineError(w, err)
		return
	}
	template := req.TemplateID
	if template == "" {
		template = baseTemplate
	}
	b := &box{id: sb.ID(), template: template, token: newToken(), metadata: req.Metadata, envs: req.EnvVars,
		started: time.Now(), procs: map[uint32]*proc{}, next: 1000}
	f.mu.Lock()
	f.boxes[b.id] = b
	f.mu.Unlock()
	f.extend(b, timeout)
	writeJSON(w, http.StatusCreated, map[string]any{"templateID": b.template, "sandboxID": b.id, "clientID": "msb",
		"envdVersion": envdVersion, "envdAccessToken": b.token})
}

// extend sets b to be killed timeout from now.
func (f *Front) extend(b *box, timeout time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.end = time.Now().Add(timeout)
	if b.timer != nil {
		b.timer.Stop()
	}
	b.timer = time.AfterFunc(timeout, func() {
		f.log.Info("e2b sandbox reached its timeout", "sandbox", b.id)
		f.close(b.id)
	})
}

// close forgets the sandbox and closes it in the engine.
func (f *Front) close(id string) error {
	f.mu.Lock()
	b := f.boxes[id]
	delete(f.boxes, id)
	f.mu.Unlock()
	if b == nil {
		return fmt.Errorf("sandbox %s: %w", id, engine.ErrNotFound)
	}
	b.mu.Lock()
	if b.timer != nil {
		b.timer.Stop()
	}
	for _, p := range b.procs {
		p.cancel() // processes outlive their streams, not their sandbox
	}
	b.mu.Unlock()
	_, err := f.e.CloseSandbox(id)
	return err
}

// live is the box of id if its sandbox still runs (one the engine closed
// is forgotten).
func (f *Front) live(id string) *box {
	b := f.box(id)
	if b == nil {
		return nil
	}
	if _, err := f.e.Sandbox(id); err != nil {
		f.close(id)
		return nil
	}
	return b
}

// listed is a sandbox as list and get describe it.
func (f *Front) listed(b *box) map[string]any {
	b.mu.Lock()
	end := b.end
	b.mu.Unlock()
	m := map[string]any{"templateID": b.template, "sandboxID": b.id, "clientID": "msb",
		"startedAt": b.started.UTC().Format(time.RFC3339Nano), "endAt": end.UTC().Format(time.RFC3339Nano),
		"cpuCount": 1, "memoryMB": 512, "diskSizeMB": 1024, "state": "running", "envdVersion": envdVersion,
		"metadata": b.metadata}
	if info, err := f.e.SandboxInfo(b.id); err == nil {
		if c := info.Limits.CPUs; c >= 1 {
			m["cpuCount"] = int(c)
		}
		if mem := info.Limits.MemoryBytes; mem > 0 {
			m["memoryMB"] = mem >> 20
		}
		if d := info.Limits.DiskBytes; d > 0 {
			m["diskSizeMB"] = d >> 20
		}
	}
	if m["metadata"] == nil {
		m["metadata"] = map[string]string{}
	}
	return m
}

func (f *Front) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	want, err := url.ParseQuery(q.Get("metadata"))
	if err != nil {
		apiError(w, api.CodeBadRequest, "metadata filter: %v", err)
		return
	}
	if st := q.Get("state"); st != "" && !strings.Contains(st, "running") {
		writeJSON(w, http.StatusOK, []any{}) // nothing is paused
		return
	}
	f.mu.Lock()
	var ids []string
	for id := range f.boxes {
		ids = append(ids, id)
	}
	f.mu.Unlock()
	sort.Strings(ids)
	out := []any{}
	for _, id := range ids {
		b := f.live(id)
		if b == nil || !matches(b.metadata, want) {
			continue
		}
		out = append(out, f.listed(b))
	}
	writeJSON(w, http.StatusOK, out)
}

func matches(md map[string]string, want url.Values) bool {
	for k := range want {
		if md[k] != want.Get(k) {
			return false
		}
	}
	return true
}

func (f *Front) get(w http.ResponseWriter, r *http.Request) {
	b := f.live(r.PathValue("id"))
	if b == nil {
		apiError(w, api.CodeNotFound, "sandbox \"%s\" doesn't exist or you don't have access to it", r.PathValue("id"))
		return
	}
	m := f.listed(b)
	m["envdAccessToken"] = b.token
	writeJSON(w, http.StatusOK, m)
}

func (f *Front) kill(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if f.live(id) == nil {
		apiError(w, api.CodeNotFound, "sandbox \"%s\" doesn't exist or you don't have access to it", id)
		return
	}
	if err := f.close(id); err != nil && !errors.Is(err, engine.ErrGone) && !errors.Is(err, engine.ErrNotFound) {
		engineError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (f *Front) setTimeout(w http.ResponseWriter, r *http.Request) {
	b := f.live(r.PathValue("id"))
	if b == nil {
		apiError(w, api.CodeNotFound, "sandbox \"%s\" doesn't exist or you don't have access to it", r.PathValue("id"))
		return
	}
	var req struct {
		Timeout int64 `json:"timeout"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil || req.Timeout <= 0 {
		apiError(w, api.CodeBadRequest, "the body must be {\"timeout\": <positive seconds>}")
		return
	}
	f.extend(b, time.Duration(req.Timeout)*time.Second)
	w.WriteHeader(http.StatusNoContent)
}
