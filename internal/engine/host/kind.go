package host

import (
	"context"
	"errors"
	"io/fs"
	"strings"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/sandbox"
	"github.com/minisandbox/msb/internal/session"
)

// A KindRule names the sentinel errors that are of one kind.
type KindRule struct {
	Kind      api.ErrorCode
	Sentinels []error
}

// A KindTable lists kinds in the order they are tried, each with its
// sentinel errors. The first sentinel an error matches decides, so a more
// precise kind comes before a broader one (path_escape before bad_request).
type KindTable []KindRule

// Kinds is every kind of msb's errors in its order, with the sentinels of
// the sandbox layer (packages sandbox and session, the standard library's
// and api's); package engine adds its own and those of the
// packages it holds with With, keeping this order.
var Kinds = KindTable{
	{api.CodeInvalidConfig, []error{sandbox.ErrInvalidConfig}},
	{api.CodePathEscape, []error{sandbox.ErrEscape}},
	{api.CodeBadRequest, []error{api.ErrBadName, sandbox.ErrInvalid, session.ErrInvalidCommand, sandbox.ErrTooLarge}},
	{api.CodeNotFound, []error{sandbox.ErrNotFound, fs.ErrNotExist}},
	{api.CodeConflict, []error{sandbox.ErrExists}},
	{api.CodeSessionEnded, []error{session.ErrSessionEnded}},
	{api.CodeNoInstance, nil},
	{api.CodeGone, []error{sandbox.ErrClosed}},
	{api.CodeQuotaExceeded, nil},
	{api.CodeTooLarge, nil},
	{api.CodeUnavailable, []error{context.Canceled, context.DeadlineExceeded, sandbox.ErrNoForwarder}},
}

// With is t with more's sentinels added to the rules of their kinds, in
// t's order of kinds; a kind t lacks comes last.
func (t KindTable) With(more KindTable) KindTable {
	out := make(KindTable, len(t))
	for i, r := range t {
		out[i] = KindRule{Kind: r.Kind, Sentinels: append([]error(nil), r.Sentinels...)}
	}
	for _, m := range more {
		i := 0
		for i < len(out) && out[i].Kind != m.Kind {
			i++
		}
		if i == len(out) {
			out = append(out, KindRule{Kind: m.Kind})
		}
		out[i].Sentinels = append(out[i].Sentinels, m.Sentinels...)
	}
	return out
}

// Kind is the class of err in the one vocabulary of msb's errors: the
// kind of the first sentinel in t that err matches; api.CodeInternal when
// it matches none.
func (t KindTable) Kind(err error) api.ErrorCode {
	for _, k := range t {
		for _, s := range k.Sentinels {
			if errors.Is(err, s) {
				return k.Kind
			}
		}
	}
	// A file operation the sandbox refused (not a directory, not a tar,
	// permission): the request's doing.
	var oe *sandbox.OpError
	if errors.As(err, &oe) && strings.HasPrefix(oe.Op, "file.") {
		return api.CodeBadRequest
	}
	return api.CodeInternal
}
