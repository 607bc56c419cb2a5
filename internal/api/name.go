package api

import (
	"errors"
	"fmt"
	"regexp"
	"sync"
	"unicode"
)

// ErrBadName: a name that becomes a file or directory name (instance id,
// model name, run id, sandbox id) could leave its directory or is not
// printable.
var ErrBadName = errors.New("invalid name")

// SessionNamePattern is what a session's name must match.
const SessionNamePattern = `^[A-Za-z0-9_][A-Za-z0-9_.@+-]{0,127}$`

// sessionName is compiled on first use, not at start-up.
var sessionName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(SessionNamePattern) })

// CheckSessionName reports whether s can name a session.
func CheckSessionName(s string) error {
	if !sessionName().MatchString(s) {
		return fmt.Errorf("%w: session name %q: use letters, digits and _.@+- (at most 128, not starting with a symbol)", ErrBadName, s)
	}
	return nil
}

// MaxNameLen bounds names that become path components.
const MaxNameLen = 255

// CheckName reports whether s can be used as one path component: not
// empty, not "." or "..", no "/" or "\", no NUL or other control
// characters, at most MaxNameLen bytes. what names the field for the error
// ("instance_id", "--run-id").
func CheckName(what, s string) error {
	switch {
	case s == "":
		return fmt.Errorf("%w: %s is empty", ErrBadName, what)
	case s == "." || s == "..":
		return fmt.Errorf("%w: %s %q is a directory reference", ErrBadName, what, s)
	case len(s) > MaxNameLen:
		return fmt.Errorf("%w: %s is %d bytes long, more than %d", ErrBadName, what, len(s), MaxNameLen)
	}
	for _, r := range s {
		if r == '/' || r == '\\' || r == unicode.ReplacementChar || unicode.IsControl(r) {
			return fmt.Errorf("%w: %s %q contains %q (a name must stay within one directory)", ErrBadName, what, s, r)
		}
	}
	return nil
}
