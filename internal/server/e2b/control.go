package e2b

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/engine"
	"github.com/minisandbox/msb/internal/server/e2b/envd/process"
)

// baseTemplate is the SDK's default template: a sandbox on the host's
// system directories, or on the root UseBase chose (users.go, base.go).
const baseTemplate = "base"

// createRequest is the body of POST /sandboxes and /v2/sandboxes; fields
// msb does not act on (secure, volumes...) are ignored, as E2B ignores
// unknown ones.
type createRequest struct {
	TemplateID string            `json:"templateID"`
	Timeout    *int64            `json:"timeout"` // seconds
	Metadata   map[string]string `json:"metadata"`
	EnvVars    map[string]string `json:"envVars"`
	// AllowInternetAccess and Network: see networkOf.
	AllowInternetAccess *bool         `json:"allow_internet_access"`
	Network             *networkRules `json:"network"`
	lifecycleRequest
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
	timeout, err := timeoutOf(req.Timeout, defaultTimeout)
	if err != nil {
		engineError(w, err)
		return
	}
	cycle, err := lifecycleOf(req.lifecycleRequest, timeout)
	if err != nil {
		engineError(w, err)
		return
	}
	if err := checkNetwork(req.Network); err != nil {
		apiError(w, api.CodeBadRequest, "%v", err)
		return
	}
	sb, err := f.start(r, req)
	if errors.Is(err, ErrNotReady) {
		apiError(w, api.CodeConflict, "%v", err)
		return
	}
	if err != nil {
		engineError(w, err)
		return
	}
	template := req.TemplateID
	if template == "" {
		template = baseTemplate
	}
	b := f.add(sb.ID(), template, req.Metadata, req.EnvVars, cycle)
	b.mu.Lock()
	b.network, b.policy = networkOf(req.AllowInternetAccess, req.Network)
	b.traffic = trafficTokenOf(req.Network)
	b.mask = maskOf(req.Network)
	b.https = httpsPortsOf(req.Network)
	b.mu.Unlock()
	f.startCommand(b, sb)
	writeJSON(w, http.StatusCreated, created(b))
}

// add registers the engine's sandbox sid as a new E2B sandbox of that id,
// to be killed (or paused, as cycle says) cycle.Timeout from now.
func (f *Front) add(sid, template string, metadata, envs map[string]string, cycle lifecycle) *box {
	b := &box{id: sid, sid: sid, template: template, user: f.defaultUser(template), token: newToken(), metadata: metadata, envs: envs,
		started: time.Now(), procs: map[uint32]*proc{}, next: 1000, closed: make(chan struct{}), cycle: cycle}
	b.logf("info", []string{"templateID", template}, "sandbox created from template %s", template)
	f.mu.Lock()
	f.boxes[b.id] = b
	f.mu.Unlock()
	f.extend(b, cycle.Timeout)
	go f.sampler(b)
	return b
}

// startCommand starts the start command of b's template, if it has one,
// as a background process of b (commands.list shows it). E2B restores it
// running from the memory its build kept; msb keeps files only, so it
// starts it again, and does not wait for its ready command.
func (f *Front) startCommand(b *box, sb *engine.Sandbox) {
	t := f.templateByRef(b.template)
	if t == nil {
		return
	}
	_, conf, ok := t.ready()
	if !ok || conf.Start == "" {
		return
	}
	cfg := &process.ProcessConfig{Cmd: "/bin/bash", Args: []string{"-l", "-c", conf.Start}}
	if conf.Workdir != "" {
		cfg.Cwd = &conf.Workdir
	}
	u, err := f.userOf(context.Background(), b, sb, "")
	if err != nil {
		b.logf("error", nil, "the start command of template %s did not start: %v", b.template, err)
		return
	}
	if pr, _ := f.launch(b, sb, cfg, "start", nil, nil, u); pr == nil {
		b.logf("warn", nil, "the start command of template %s did not start: the sandbox was being paused", b.template)
	}
}

// created is the answer of create, connect and fork for b.
func created(b *box) map[string]any {
	m := map[string]any{"templateID": b.template, "sandboxID": b.id, "clientID": "msb",
		"envdVersion": envdVersion, "envdAccessToken": b.token}
	if t := b.trafficToken(); t != "" {
		m["trafficAccessToken"] = t
	}
	return m
}

// start starts the engine's sandbox of a create, with the network it asks
// for: from the base, an instance or a named snapshot (whose environment
// it keeps: envVars do not apply to it).
func (f *Front) start(r *http.Request, req createRequest) (*engine.Sandbox, error) {
	sr := engine.SandboxRequest{Lifetime: -1, IdleTimeout: -1, Labels: e2bLabels()}
	sr.Network, sr.NetPolicy = networkOf(req.AllowInternetAccess, req.Network)
	if tr, ok, err := f.templateSandbox(req.TemplateID); ok {
		if err != nil {
			return nil, err
		}
		sr.Image, sr.Workdir, sr.Env = tr.Image, tr.Workdir, tr.Env
		for _, k := range slices.Sorted(maps.Keys(req.EnvVars)) {
			sr.Env = setEnv(sr.Env, k, req.EnvVars[k])
		}
		return f.createSandbox(r.Context(), sr)
	}
	if req.TemplateID == "" || req.TemplateID == baseTemplate {
		network, policy := sr.Network, sr.NetPolicy
		sr = f.baseRequest(envList(req.EnvVars))
		sr.Network, sr.NetPolicy = network, policy
		return f.createSandbox(r.Context(), sr)
	}
	if _, err := f.e.Instance(req.TemplateID); err != nil {
		sb, err := f.fromSnapshot(r, req.TemplateID, sr.Network, sr.NetPolicy)
		if sb != nil || err != nil {
			return sb, err
		}
		return nil, fmt.Errorf("template '%s' not found: a template is an msb instance id, a snapshot or %q: %w",
			req.TemplateID, baseTemplate, engine.ErrNotFound)
	}
	sr.InstanceID = req.TemplateID
	sr.Env = envList(req.EnvVars)
	return f.createSandbox(r.Context(), sr)
}

// envList is envs as NAME=value, sorted by name.
func envList(envs map[string]string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(envs)) {
		out = append(out, k+"="+envs[k])
	}
	return out
}

// extend sets b to reach its timeout (timedOut) timeout from now.
func (f *Front) extend(b *box, timeout time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	f.setEnd(b, timeout)
}

// setEnd is extend with b.mu held.
func (f *Front) setEnd(b *box, timeout time.Duration) {
	b.end = time.Now().Add(timeout)
	if b.timer != nil {
		b.timer.Stop()
	}
	b.timer = time.AfterFunc(timeout, func() { f.timedOut(b) })
}

// close forgets the sandbox and closes it in the engine (or deletes the
// snapshot a paused one would resume from, and its record).
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
		p.stop() // processes outlive their streams, not their sandbox
	}
	b.takePrimed("", "")
	b.endWatchers()
	close(b.closed)
	sid, paused := b.sid, b.paused
	b.mu.Unlock()
	if paused != "" {
		f.forgetPaused(id)
		return f.e.DeleteSnapshot(paused)
	}
	_, err := f.e.CloseSandbox(sid)
	return err
}

// live is the box of id if its sandbox still runs or is paused (one the
// engine closed is forgotten).
func (f *Front) live(id string) *box {
	b := f.box(id)
	if b == nil {
		return nil
	}
	sid, paused := b.engineID()
	if paused {
		return b
	}
	if _, err := f.e.Sandbox(sid); err != nil {
		f.close(id)
		return nil
	}
	return b
}

// running is the box of id if its sandbox runs.
func (f *Front) running(id string) *box {
	b := f.live(id)
	if b == nil {
		return nil
	}
	if _, paused := b.engineID(); paused {
		return nil
	}
	return b
}

// listed is a sandbox as list and get describe it.
func (f *Front) listed(b *box) map[string]any {
	b.mu.Lock()
	end, sid, state, pause := b.end, b.sid, "running", b.pause
	if b.paused != "" {
		state = "paused"
	}
	b.mu.Unlock()
	m := map[string]any{"templateID": b.template, "sandboxID": b.id, "clientID": "msb",
		"startedAt": b.started.UTC().Format(time.RFC3339Nano), "endAt": end.UTC().Format(time.RFC3339Nano),
		"cpuCount": 1, "memoryMB": 512, "diskSizeMB": 1024, "state": state, "envdVersion": envdVersion,
		"metadata": b.metadata}
	if info, err := f.e.SandboxInfo(sid); err == nil {
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
	if pause != "" {
		m["msbPause"] = pause // what its last pause kept (pauseSnapshot); the SDK ignores it
	}
	return m
}

func (f *Front) get(w http.ResponseWriter, r *http.Request) {
	b := f.live(r.PathValue("id"))
	if b == nil {
		apiError(w, api.CodeNotFound, "sandbox \"%s\" doesn't exist or you don't have access to it", r.PathValue("id"))
		return
	}
	m := f.listed(b)
	m["envdAccessToken"] = b.token
	m["lifecycle"] = b.cycle.info()
	if m["state"] == "paused" {
		m["pauseMode"] = "filesystem" // files only: a resume starts its processes afresh
		if m["msbPause"] == pauseProcesses {
			m["pauseMode"] = "full" // its processes too, which a resume restores (pauseSnapshot)
		}
	}
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
	var req struct {
		Timeout *int64 `json:"timeout"`
	}
	if err := decode(r, &req); err != nil {
		engineError(w, err)
		return
	}
	if req.Timeout == nil {
		apiError(w, api.CodeBadRequest, "the body must be {\"timeout\": <seconds>}")
		return
	}
	if *req.Timeout < 0 {
		apiError(w, api.CodeBadRequest, "timeout must be 0 (the timeout now) or positive seconds, got %d", *req.Timeout)
		return
	}
	timeout := time.Duration(*req.Timeout) * time.Second
	b := f.running(r.PathValue("id"))
	if b == nil {
		notFound(w, r.PathValue("id"))
		return
	}
	f.extend(b, timeout)
	b.logf("info", nil, "timeout set: the sandbox ends in %s", timeout)
	w.WriteHeader(http.StatusNoContent)
}
