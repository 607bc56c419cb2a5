package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/client"
	"github.com/minisandbox/msb/internal/dataset"
	"github.com/minisandbox/msb/internal/engine"
	"github.com/minisandbox/msb/internal/harness"
	"github.com/minisandbox/msb/internal/privtest"
	"github.com/minisandbox/msb/internal/sandbox"
	"github.com/minisandbox/msb/internal/server"
	"github.com/minisandbox/msb/internal/session"
	"github.com/minisandbox/msb/internal/spec"
	"github.com/minisandbox/msb/internal/store"
	"github.com/minisandbox/msb/internal/task"
)

// TestErrorTable walks the one vocabulary of errors: every api.ErrorCode
// (api.ErrorCodes, which its test keeps whole)
// has an HTTP status, the one docs/api.md gives it, an exit code, and a
// class in the Python client's table whose status fallback is that class
// or a base of it; and both clients take a body that is not the API's
// for the same code of its status.
func TestErrorTable(t *testing.T) {
	codes := api.ErrorCodes
	docs := docsStatuses(t)
	py := pythonErrorTable(t)
	for _, c := range codes {
		status, ok := server.Status(c)
		if !ok {
			t.Errorf("%s: no HTTP status (internal/server/errors.go statusOf)", c)
		}
		if !slices.Contains(docs[c], status) {
			t.Errorf("%s: status %d, docs/api.md says %v", c, status, docs[c])
		}
		if _, ok := exitCodes[c]; !ok {
			t.Errorf("%s: no exit code (internal/cli/root.go exitCodes)", c)
		}
		bases, ok := py.ByCode[string(c)]
		if !ok {
			t.Errorf("%s: no Python exception (clients/python/src/msb/errors.py BY_CODE)", c)
			continue
		}
		fallback := py.ByStatus[strconv.Itoa(status)]
		if !slices.Contains(bases, fallback) {
			t.Errorf("%s: Python class %s, but status %d falls back to %q, not one of its bases %v", c, bases[0], status, fallback, bases)
		}
		// A body that is not the API's: the Go client takes the code whose
		// class the Python client raises, one of the status's own.
		gofb := client.CodeOfStatus(status)
		if s, _ := server.Status(gofb); s != status {
			t.Errorf("status %d: the Go client falls back to %s, answered with %d", status, gofb, s)
		}
		if names := py.ByCode[string(gofb)]; len(names) == 0 || names[0] != fallback {
			t.Errorf("status %d: the Go client falls back to %s, the Python client to %s", status, gofb, fallback)
		}
	}
	for c := range docs {
		if !slices.Contains(codes, c) {
			t.Errorf("docs/api.md names code %s, which package api does not have", c)
		}
	}
	for c := range py.ByCode {
		if !slices.Contains(codes, api.ErrorCode(c)) {
			t.Errorf("the Python client names code %s, which package api does not have", c)
		}
	}
}

// TestKindExitCodes: the exit code and --json class of each error the
// classifiers named before there was one vocabulary. The exit codes are
// those msb always gave, except where msb in-process and msb as the
// daemon's client disagreed; those now agree, as marked.
func TestKindExitCodes(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("doing it: %w", err) }
	for _, tc := range []struct {
		err   error
		exit  int
		class string
	}{
		{wrap(errUsage), exitUsage, "usage"},
		{wrap(errNoInput), exitUsage, "usage"},
		{wrap(errNoDir), exitUsage, "usage"},
		{wrap(errUnavailable), exitUnavailable, "unsupported_host"}, // class was "unavailable", the daemon's word for shutting down
		{wrap(sandbox.ErrInvalidConfig), exitInvalidConfig, "invalid_config"},
		{wrap(engine.ErrBadRequest), exitUsage, "bad_request"},
		{wrap(engine.ErrNoCache), exitUsage, "not_found"},
		{wrap(engine.ErrNotFound), exitUsage, "not_found"},
		{wrap(dataset.ErrBadPredictions), exitUsage, "bad_request"},
		{wrap(dataset.ErrUnknownID), exitUsage, "not_found"},
		{wrap(dataset.ErrUnknownFormat), exitUsage, "bad_request"},
		{wrap(dataset.ErrBadFilter), exitUsage, "bad_request"},
		{wrap(spec.ErrBadSpecFile), exitUsage, "bad_request"},
		{wrap(api.ErrBadName), exitUsage, "bad_request"},
		{wrap(store.ErrBadRef), exitUsage, "bad_request"},
		{wrap(sandbox.ErrEscape), exitUsage, "path_escape"},         // was 1; the daemon's path_escape was 2
		{wrap(sandbox.ErrInvalid), exitUsage, "bad_request"},        // was 1; the daemon's bad_request was 2
		{wrap(sandbox.ErrTooLarge), exitUsage, "bad_request"},       // was 1
		{wrap(session.ErrInvalidCommand), exitUsage, "bad_request"}, // was 1
		{wrap(sandbox.ErrNotFound), exitUsage, "not_found"},         // was 1; the daemon's not_found was 2
		{wrap(fs.ErrNotExist), exitUsage, "not_found"},              // was 1
		{wrap(engine.ErrNoInstance), exitUsage, "no_instance"},      // was 1; the daemon's no_instance was 2
		{wrap(sandbox.ErrExists), exitFailure, "conflict"},
		{wrap(harness.ErrRunBusy), exitFailure, "conflict"},
		{wrap(task.ErrDiff), exitFailure, "conflict"},
		{wrap(session.ErrSessionEnded), exitFailure, "session_ended"},
		{wrap(engine.ErrGone), exitFailure, "sandbox_gone"},
		{wrap(sandbox.ErrClosed), exitFailure, "sandbox_gone"},
		{wrap(engine.ErrQuota), exitFailure, "quota_exceeded"},
		{wrap(engine.ErrTooLarge), exitFailure, "insufficient_storage"},
		{wrap(engine.ErrClosed), exitFailure, "unavailable"},
		// The sandbox layer's kinds and the engine's are one table, tried in
		// its order of kinds (host.Kinds.With): a more precise kind of the
		// layer below still beats a broader one of the engine.
		{fmt.Errorf("%w: %w", engine.ErrBadRequest, sandbox.ErrEscape), exitUsage, "path_escape"},
		{fmt.Errorf("%w: %w", engine.ErrClosed, sandbox.ErrInvalidConfig), exitInvalidConfig, "invalid_config"},
		{errors.New("something broke"), exitFailure, "internal"}, // class was "failure"
		{&exitError{code: exitFailure, msg: "2 evaluations ended without a verdict"}, exitFailure, "failure"},
		{&exitError{code: exitNoCommand, kind: "command_not_found"}, exitNoCommand, "command_not_found"},
	} {
		if exit, class := exitCode(tc.err); exit != tc.exit || class != tc.class {
			t.Errorf("exitCode(%v) = %d %s, want %d %s", tc.err, exit, class, tc.exit, tc.class)
		}
	}
}

// TestDaemonExitCodes: an error the daemon answered exits as the same
// kind of error met in msb itself, by the daemon's code.
func TestDaemonExitCodes(t *testing.T) {
	for code, exit := range map[api.ErrorCode]int{
		api.CodeBadRequest: exitUsage, api.CodePathEscape: exitUsage, api.CodeUnauthorized: exitUsage,
		api.CodeNotFound: exitUsage, api.CodeMethodNotAllowed: exitUsage, api.CodeNoInstance: exitUsage,
		api.CodeBodyTooLarge: exitUsage, api.CodeConflict: exitFailure, api.CodeSessionEnded: exitFailure,
		api.CodeGone: exitFailure, api.CodeQuotaExceeded: exitFailure, api.CodeInternal: exitFailure,
		api.CodeUnavailable: exitFailure, api.CodeTooLarge: exitFailure,
		api.CodeInvalidConfig:        exitInvalidConfig, // new: the daemon said bad_request, exit 2
		"a_code_from_a_newer_daemon": exitFailure,
	} {
		err := fmt.Errorf("creating a sandbox: %w", &client.Error{Status: 400, Info: api.ErrorInfo{Code: code, Message: "m"}})
		if got, class := exitCode(err); got != exit || class != string(code) {
			t.Errorf("the daemon's %s: exit %d, class %s; want %d, %s", code, got, class, exit, code)
		}
	}
}

// docsStatuses reads docs/api.md's "Errors" table: code -> statuses.
func docsStatuses(t *testing.T) map[api.ErrorCode][]int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "api.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	start := strings.Index(text, "\n## Errors\n")
	if start < 0 {
		t.Fatal("docs/api.md has no Errors section")
	}
	section := text[start+1:]
	if end := strings.Index(section[1:], "\n## "); end >= 0 {
		section = section[:end+1]
	}
	out := map[api.ErrorCode][]int{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\| ([0-9]{3}) \\|").FindAllStringSubmatch(section, -1) {
		status, _ := strconv.Atoi(m[2])
		out[api.ErrorCode(m[1])] = append(out[api.ErrorCode(m[1])], status)
	}
	return out
}

// pyErrors is the Python client's table: code -> the class's name and
// its bases' (most derived first), status -> the fallback class's name.
type pyErrors struct {
	ByCode   map[string][]string `json:"by_code"`
	ByStatus map[string]string   `json:"by_status"`
}

const dumpPyErrors = `
import json
from msb import errors
print(json.dumps({
    "by_code": {c: [k.__name__ for k in cls.__mro__] for c, cls in errors.BY_CODE.items()},
    "by_status": {str(s): cls.__name__ for s, cls in errors._BY_STATUS.items()},
}))
`

// pythonErrorTable imports the Python client's errors module (stdlib
// only, so any python3 does) and returns its table.
func pythonErrorTable(t *testing.T) pyErrors {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		privtest.Skip(t, "no python3 to read the Python client's error table: %v", err)
	}
	cmd := exec.Command(py, "-c", dumpPyErrors)
	src, err := filepath.Abs(filepath.Join("..", "..", "clients", "python", "src"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Env = append(os.Environ(), "PYTHONPATH="+src, "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("reading the Python client's error table: %v", err)
	}
	var tab pyErrors
	if err := json.Unmarshal(out, &tab); err != nil {
		t.Fatalf("the Python client's error table %q: %v", out, err)
	}
	return tab
}
