package e2b

import (
	"net/http"
	"time"
)

// minRefresh is the least a refresh keeps a sandbox alive for, and what
// one that names no duration asks for: E2B's default sandbox timeout on
// its API (15 s), not the SDK's 300 s at create.
const minRefresh = 15 * time.Second

// refresh answers POST /sandboxes/{id}/refreshes ({"duration": seconds}):
// the running sandbox lives at least that long from now, never less
// than it would have (a refresh moves the end later only, as E2B's
// keep-alive does). A duration under 15 s, none or a missing body is
// 15 s, as on E2B; a paused or unknown sandbox is a 404.
func (f *Front) refresh(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Duration *int64 `json:"duration"`
	}
	if err := decode(r, &req); err != nil {
		engineError(w, err)
		return
	}
	d := minRefresh
	if req.Duration != nil && time.Duration(*req.Duration)*time.Second > d {
		d = time.Duration(*req.Duration) * time.Second
	}
	b := f.running(r.PathValue("id"))
	if b == nil {
		notFound(w, r.PathValue("id"))
		return
	}
	if f.keepAlive(b, d) {
		b.logf("info", nil, "refreshed: the sandbox ends in %s", d)
	}
	w.WriteHeader(http.StatusNoContent)
}

// keepAlive moves b's end to d from now if that is later than its end,
// and says whether it did.
func (f *Front) keepAlive(b *box, d time.Duration) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	later := time.Now().Add(d).After(b.end)
	if later {
		f.setEnd(b, d)
	}
	return later
}

// envs answers envd's GET /envs: the environment variables envd gives
// every process of the sandbox, here the envVars it was created with (a
// fork's children: their parent's).
func (f *Front) envs(w http.ResponseWriter, r *http.Request) {
	b, _ := r.Context().Value(boxKey{}).(*box)
	envs := map[string]string{}
	if b != nil && b.envs != nil {
		envs = b.envs
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, envs)
}
