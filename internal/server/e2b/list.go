package e2b

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/minisandbox/msb/internal/engine"
)

// maxListLimit is the most sandboxes one page of the v2 list holds, and
// its size when the query gives none (E2B's default).
const maxListLimit = 100

// listQuery is a list's filters, order and page.
type listQuery struct {
	metadata map[string]string
	states   []string // empty: any
	template string
	after    time.Time // started at or after; zero: any
	desc     bool      // newest first
	limit    int       // 0: no pages (v1)
	from     *cursor   // the page starts after it
}

// cursor is where a page of the list ended: the last sandbox's start and
// id, which order the list. nextToken carries it, encoded.
type cursor struct {
	started int64 // unix nanoseconds
	id      string
}

func (c cursor) token() string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(c.started, 10) + "/" + c.id))
}

func parseCursor(tok string) (*cursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err == nil {
		ns, id, ok := strings.Cut(string(b), "/")
		if n, perr := strconv.ParseInt(ns, 10, 64); ok && perr == nil {
			return &cursor{n, id}, nil
		}
	}
	return nil, fmt.Errorf("%w: nextToken %q is not one this list gave", engine.ErrBadRequest, tok)
}

// before reports whether a sandbox started at started with id id comes
// before c in the list's order.
func (c cursor) before(started int64, id string, desc bool) bool {
	if started == c.started {
		return id <= c.id
	}
	return (started < c.started) != desc
}

// parseList reads a list's query: metadata (k=v pairs, form-encoded, their
// keys and values escaped once more, as the SDK sends them), state (a
// comma-separated list, or the parameter repeated), template,
// startedAfter (RFC 3339), order (asc or desc, the default), and for the
// v2 list limit (1 to 100) and nextToken.
func parseList(q url.Values, paged bool) (listQuery, error) {
	lq := listQuery{metadata: map[string]string{}, template: q.Get("template"), desc: true}
	md, err := url.ParseQuery(q.Get("metadata"))
	if err != nil {
		return lq, fmt.Errorf("%w: metadata filter: %v", engine.ErrBadRequest, err)
	}
	for k := range md {
		key, kerr := url.QueryUnescape(k)
		val, verr := url.QueryUnescape(md.Get(k))
		if kerr != nil || verr != nil {
			return lq, fmt.Errorf("%w: metadata filter %q is not escaped", engine.ErrBadRequest, k)
		}
		lq.metadata[key] = val
	}
	for _, st := range q["state"] {
		for s := range strings.SplitSeq(st, ",") {
			if s != "running" && s != "paused" {
				return lq, fmt.Errorf("%w: state %q: a sandbox is running or paused", engine.ErrBadRequest, s)
			}
			lq.states = append(lq.states, s)
		}
	}
	if s := q.Get("startedAfter"); s != "" {
		if lq.after, err = time.Parse(time.RFC3339Nano, s); err != nil {
			return lq, fmt.Errorf("%w: startedAfter %q is no RFC 3339 time", engine.ErrBadRequest, s)
		}
	}
	switch q.Get("order") {
	case "", "desc":
	case "asc":
		lq.desc = false
	default:
		return lq, fmt.Errorf("%w: order %q is asc or desc", engine.ErrBadRequest, q.Get("order"))
	}
	if !paged {
		return lq, nil
	}
	lq.limit = maxListLimit
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return lq, fmt.Errorf("%w: limit %q is not a positive number", engine.ErrBadRequest, s)
		}
		lq.limit = min(n, maxListLimit)
	}
	if tok := q.Get("nextToken"); tok != "" {
		if lq.from, err = parseCursor(tok); err != nil {
			return lq, err
		}
	}
	return lq, nil
}

// keeps reports whether the list's filters keep b, which list describes as m.
func (lq listQuery) keeps(b *box, m map[string]any) bool {
	for k, v := range lq.metadata {
		if b.metadata[k] != v {
			return false
		}
	}
	return (len(lq.states) == 0 || slices.Contains(lq.states, m["state"].(string))) &&
		(lq.template == "" || lq.template == b.template) && !b.started.Before(lq.after)
}

// list answers GET /sandboxes (every sandbox that the filters keep) and
// GET /v2/sandboxes (a page of them, and x-next-token when more follow),
// ordered by when they started.
func (f *Front) list(w http.ResponseWriter, r *http.Request) {
	lq, err := parseList(r.URL.Query(), strings.HasPrefix(r.URL.Path, "/v2/"))
	if err != nil {
		engineError(w, err)
		return
	}
	f.mu.Lock()
	boxes := make([]*box, 0, len(f.boxes))
	for _, b := range f.boxes {
		boxes = append(boxes, b)
	}
	f.mu.Unlock()
	slices.SortFunc(boxes, func(a, b *box) int {
		if c := a.started.Compare(b.started); c != 0 {
			if lq.desc {
				return -c
			}
			return c
		}
		return strings.Compare(a.id, b.id)
	})
	out := []any{}
	var last *box
	for _, b := range boxes {
		if lq.from != nil && lq.from.before(b.started.UnixNano(), b.id, lq.desc) {
			continue
		}
		if f.live(b.id) == nil {
			continue
		}
		m := f.listed(b)
		if !lq.keeps(b, m) {
			continue
		}
		if lq.limit > 0 && len(out) == lq.limit {
			w.Header().Set("X-Next-Token", cursor{last.started.UnixNano(), last.id}.token())
			break
		}
		out, last = append(out, m), b
	}
	writeJSON(w, http.StatusOK, out)
}
