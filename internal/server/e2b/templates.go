package e2b

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/engine"
)

// A template is what the SDK's Template builder (Template.build,
// build_in_background) makes: a name, and its builds. A build runs the
// template's steps in a build sandbox and keeps what they wrote as a named
// snapshot (templatePrefix...); the template's config (ENV, WORKDIR, USER)
// is recorded beside it, and create(template) starts a sandbox on that
// snapshot with that config. Templates live in the daemon's memory and,
// once a build is ready, in a record in the cache (records.go), which a
// restarted daemon loads (restore.go); their snapshots are in the store.

// templatePrefix starts the names of the snapshots template builds keep.
const templatePrefix = "e2b-template-"

// template is one template name and its latest build.
type template struct {
	id, name string
	tags     []string
	upload   string // the token of its upload URLs

	mu    sync.Mutex // guards build and done
	build *build     // the last build asked for
	done  *build     // the last build that is ready: what sandboxes start from
}

// build is one build of a template.
type build struct {
	id      string
	created time.Time

	mu       sync.Mutex // guards the fields below
	status   string     // waiting, building, ready, error
	logs     []buildLog
	reason   *buildLog // why it failed
	snapshot string    // the snapshot it made, once ready
	config   templateConfig
}

// templateConfig is what a template's steps set besides files: the
// environment, working directory and user its sandboxes start with.
type templateConfig struct {
	Env     []string `json:"env,omitempty"` // NAME=value, in the order set
	Workdir string   `json:"workdir,omitempty"`
	User    string   `json:"user,omitempty"`
	Start   string   `json:"start,omitempty"` // the start command (set_start_cmd): started at each create
}

// buildLog is one line of a build's log (E2B's BuildLogEntry).
type buildLog struct {
	at      time.Time
	level   string
	message string
	step    string
}

func (l buildLog) json() map[string]any {
	m := map[string]any{"timestamp": l.at.UTC().Format(time.RFC3339Nano), "level": l.level, "message": l.message}
	if l.step != "" {
		m["step"] = l.step
	}
	return m
}

func (b *build) logf(level, step, format string, a ...any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.logs = append(b.logs, buildLog{at: time.Now(), level: level, message: fmt.Sprintf(format, a...), step: step})
}

// finish ends b as ready (snapshot set) or failed with err at step.
func (b *build) finish(snapshot string, conf templateConfig, step string, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err != nil {
		b.status = "error"
		b.reason = &buildLog{at: time.Now(), level: "error", message: err.Error(), step: step}
		b.logs = append(b.logs, *b.reason)
		return
	}
	b.status, b.snapshot, b.config = "ready", snapshot, conf
	b.logs = append(b.logs, buildLog{at: time.Now(), level: "info", message: "build ready: snapshot " + snapshot, step: "finalize"})
}

// newUUID is a random (version 4) UUID: the SDK parses build ids as UUIDs.
func newUUID() string {
	b := make([]byte, 16)
	rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// templateByRef is the template an id, a name, a name:tag or a
// name:build-id names.
func (f *Front) templateByRef(ref string) *template {
	f.mu.Lock()
	defer f.mu.Unlock()
	if t := f.templates[ref]; t != nil {
		return t
	}
	name, tag, tagged := strings.Cut(ref, ":")
	for _, t := range f.templates {
		if t.name == name && (!tagged || t.hasTag(tag)) {
			return t
		}
	}
	return nil
}

// hasTag reports whether tag is one of t's tags or its last build's id.
func (t *template) hasTag(tag string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Contains(t.tags, tag) || t.build != nil && t.build.id == tag || t.done != nil && t.done.id == tag
}

// ready is the snapshot and config of t's last build that is ready, so
// a template being built again keeps starting sandboxes.
func (t *template) ready() (snapshot string, conf templateConfig, ok bool) {
	t.mu.Lock()
	b := t.done
	t.mu.Unlock()
	if b == nil {
		return "", templateConfig{}, false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.snapshot, b.config, b.status == "ready"
}

// requestBuild is POST /v3/templates: a template of that name (a new one,
// or the one that has it) and a new build waiting for its steps.
func (f *Front) requestBuild(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Name  string   `json:"name"`
		Alias string   `json:"alias"`
		Tags  []string `json:"tags"`
	}
	if err := decode(r, &req); err != nil {
		engineError(w, err)
		return
	}
	if req.Name == "" {
		req.Name = req.Alias
	}
	name, tag, _ := strings.Cut(req.Name, ":")
	if name == "" {
		apiError(w, api.CodeBadRequest, "a template build needs a name")
		return
	}
	tags := req.Tags
	if tag != "" {
		tags = append(tags, tag)
	}
	f.mu.Lock()
	var t *template
	for _, o := range f.templates {
		if o.name == name {
			t = o
		}
	}
	if t == nil {
		t = &template{id: "tpl" + newToken()[:16], name: name, upload: newToken()}
		f.templates[t.id] = t
	}
	f.mu.Unlock()
	b := &build{id: newUUID(), created: time.Now(), status: "waiting"}
	t.mu.Lock()
	t.build = b
	for _, g := range tags {
		if !slices.Contains(t.tags, g) {
			t.tags = append(t.tags, g)
		}
	}
	t.mu.Unlock()
	if len(tags) == 0 {
		tags = []string{"default"}
	}
	writeJSON(w, http.StatusAccepted, map[string]any{"templateID": t.id, "buildID": b.id, "public": false,
		"names": []string{name}, "aliases": []string{name}, "tags": tags})
}

// buildOf is the template and build a request's path names, or writes
// the 404.
func (f *Front) buildOf(w http.ResponseWriter, r *http.Request) (*template, *build) {
	t := f.templateByRef(r.PathValue("template"))
	if t == nil {
		apiError(w, api.CodeNotFound, "template '%s' not found", r.PathValue("template"))
		return nil, nil
	}
	t.mu.Lock()
	b := t.build
	t.mu.Unlock()
	if b == nil || b.id != r.PathValue("build") {
		apiError(w, api.CodeNotFound, "build '%s' of template '%s' not found", r.PathValue("build"), t.id)
		return nil, nil
	}
	return t, b
}

// buildStatus is GET /templates/{template}/builds/{build}/status: its
// status and its log from logsOffset on (at most 100 lines, as E2B).
func (f *Front) buildStatus(w http.ResponseWriter, r *http.Request) {
	t, b := f.buildOf(w, r)
	if b == nil {
		return
	}
	offset := 0
	if s := r.URL.Query().Get("logsOffset"); s != "" {
		if _, err := fmt.Sscan(s, &offset); err != nil || offset < 0 {
			apiError(w, api.CodeBadRequest, "logsOffset must be a count of lines, got %q", s)
			return
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	entries := []any{}
	for i := offset; i < len(b.logs) && len(entries) < 100; i++ {
		entries = append(entries, b.logs[i].json())
	}
	m := map[string]any{"templateID": t.id, "buildID": b.id, "status": b.status, "logs": []string{}, "logEntries": entries}
	if b.reason != nil {
		m["reason"] = map[string]any{"message": b.reason.message, "step": b.reason.step, "logEntries": []any{}}
	}
	writeJSON(w, http.StatusOK, m)
}

// templateInfo is GET /templates/aliases/{name} (alias) and GET
// /templates/{template}/tags (templateTags): one pattern, as the two
// overlap.
func (f *Front) templateInfo(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.PathValue("template") == "aliases":
		f.alias(w, r.PathValue("what"))
	case r.PathValue("what") == "tags":
		f.templateTags(w, r.PathValue("template"))
	default:
		apiError(w, api.CodeNotFound, "no route %s %s in msb's E2B API (see docs/e2b.md)", r.Method, r.URL.Path)
	}
}

// alias answers whether a template has that name.
func (f *Front) alias(w http.ResponseWriter, name string) {
	if name == baseTemplate { // E2B's public base, which every team sees
		writeJSON(w, http.StatusOK, map[string]any{"templateID": baseTemplate, "public": true})
		return
	}
	t := f.templateByRef(name)
	if t == nil {
		apiError(w, api.CodeNotFound, "template alias '%s' not found", name)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"templateID": t.id, "public": false})
}

// templateTags answers the tags of ref's builds that are ready (msb keeps
// a template's last build).
func (f *Front) templateTags(w http.ResponseWriter, ref string) {
	t := f.templateByRef(ref)
	if t == nil {
		apiError(w, api.CodeNotFound, "template '%s' not found", ref)
		return
	}
	out := []any{}
	t.mu.Lock()
	b, tags := t.done, slices.Clone(t.tags)
	t.mu.Unlock()
	if b != nil {
		if len(tags) == 0 {
			tags = []string{"default"}
		}
		for _, g := range tags {
			out = append(out, map[string]any{"tag": g, "buildID": b.id, "createdAt": b.created.UTC().Format(time.RFC3339Nano)})
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// ErrNotReady: a template whose last build is not ready (building, or
// failed) cannot start sandboxes.
var ErrNotReady = errors.New("template has no build that is ready")

// templateSandbox is the request that starts a sandbox of a ready
// template, or false when ref names no template.
func (f *Front) templateSandbox(ref string) (engine.SandboxRequest, bool, error) {
	t := f.templateByRef(ref)
	if t == nil {
		return engine.SandboxRequest{}, false, nil
	}
	snap, conf, ok := t.ready()
	if !ok {
		return engine.SandboxRequest{}, true, fmt.Errorf("template '%s': %w", ref, ErrNotReady)
	}
	return engine.SandboxRequest{Image: "snapshot/" + snap, Env: slices.Clone(conf.Env), Workdir: conf.Workdir, Sudo: f.sudoPath()}, true, nil
}

// uploadOK checks an upload URL's token for template id.
func (f *Front) uploadOK(id, token string) *template {
	f.mu.Lock()
	t := f.templates[id]
	f.mu.Unlock()
	if t == nil || subtle.ConstantTimeCompare([]byte(token), []byte(t.upload)) != 1 {
		return nil
	}
	return t
}
