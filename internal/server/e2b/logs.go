package e2b

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/minisandbox/msb/internal/engine"
)

// maxLogs is how many lines a sandbox's log keeps; older ones are dropped.
const maxLogs = 1000

// logLevels are E2B's log levels, least severe first.
var logLevels = []string{"debug", "info", "warn", "error"}

// logEntry is one line of a sandbox's log: something the front end did
// with it (created, paused, resumed, a process started or ended, its
// timeout moved). E2B's logs are its envd's; these are msb's account of
// the same events.
type logEntry struct {
	at      time.Time
	level   string
	message string
	fields  map[string]string
}

// logf adds a line to b's log; kv are field names and values.
func (b *box) logf(level string, kv []string, format string, a ...any) {
	e := logEntry{at: time.Now(), level: level, message: fmt.Sprintf(format, a...), fields: map[string]string{"sandboxID": b.id}}
	for i := 0; i+1 < len(kv); i += 2 {
		e.fields[kv[i]] = kv[i+1]
	}
	b.logMu.Lock()
	defer b.logMu.Unlock()
	if len(b.logs) == maxLogs {
		b.logs = b.logs[1:]
	}
	b.logs = append(b.logs, e)
}

func (e logEntry) entry() map[string]any {
	return map[string]any{"timestamp": e.at.UTC().Format(time.RFC3339Nano), "message": e.message, "level": e.level, "fields": e.fields}
}

// logsOf is b's log, oldest first.
func (b *box) logsOf() []logEntry {
	b.logMu.Lock()
	defer b.logMu.Unlock()
	return slices.Clone(b.logs)
}

// intParam reads an optional integer query parameter.
func intParam(r *http.Request, name string, def int64) (int64, error) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%w: %s %q is not a number", engine.ErrBadRequest, name, s)
	}
	return n, nil
}

// logs answers GET /sandboxes/{id}/logs: the lines from start (unix
// milliseconds) on, at most limit, both as lines and as entries.
func (f *Front) logs(w http.ResponseWriter, r *http.Request) {
	b := f.live(r.PathValue("id"))
	if b == nil {
		notFound(w, r.PathValue("id"))
		return
	}
	start, err := intParam(r, "start", 0)
	var limit int64
	if err == nil {
		limit, err = intParam(r, "limit", maxLogs)
	}
	if err != nil {
		engineError(w, err)
		return
	}
	lines, entries := []any{}, []any{}
	for _, e := range b.logsOf() {
		if e.at.UnixMilli() < start || int64(len(lines)) >= limit {
			continue
		}
		lines = append(lines, map[string]any{"timestamp": e.at.UTC().Format(time.RFC3339Nano), "line": e.message})
		entries = append(entries, e.entry())
	}
	writeJSON(w, http.StatusOK, map[string]any{"logs": lines, "logEntries": entries})
}

// logsV2 answers GET /v2/sandboxes/{id}/logs: entries from cursor (unix
// milliseconds) forward, or back from it (direction=backward, newest
// first; the default cursor is then now), at least as severe as level,
// whose message holds search, at most limit.
func (f *Front) logsV2(w http.ResponseWriter, r *http.Request) {
	b := f.live(r.PathValue("id"))
	if b == nil {
		notFound(w, r.PathValue("id"))
		return
	}
	q := r.URL.Query()
	back := q.Get("direction") == "backward"
	if d := q.Get("direction"); d != "" && d != "forward" && !back {
		engineError(w, fmt.Errorf("%w: direction %q is forward or backward", engine.ErrBadRequest, d))
		return
	}
	minLevel := 0
	if l := q.Get("level"); l != "" {
		if minLevel = slices.Index(logLevels, l); minLevel < 0 {
			engineError(w, fmt.Errorf("%w: level %q is one of %v", engine.ErrBadRequest, l, logLevels))
			return
		}
	}
	def := int64(0)
	if back {
		def = time.Now().UnixMilli()
	}
	cur, err := intParam(r, "cursor", def)
	var limit int64
	if err == nil {
		limit, err = intParam(r, "limit", maxLogs)
	}
	if err != nil {
		engineError(w, err)
		return
	}
	logs := b.logsOf()
	if back {
		slices.Reverse(logs)
	}
	out := []any{}
	for _, e := range logs {
		ms := e.at.UnixMilli()
		if back && ms > cur || !back && ms < cur || slices.Index(logLevels, e.level) < minLevel ||
			!strings.Contains(e.message, q.Get("search")) || int64(len(out)) >= limit {
			continue
		}
		out = append(out, e.entry())
	}
	writeJSON(w, http.StatusOK, map[string]any{"logs": out})
}
