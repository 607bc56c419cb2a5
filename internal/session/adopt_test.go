package session

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// shellStateDump prints what a command sees of its shell: $? and $_ first,
// then every variable with its attributes, functions, options, aliases,
// traps, umask, flags, the working directory and the environment a child
// gets.
const shellStateDump = `printf '%s|%s\n' "$?" "$_"; declare -p; declare -f; shopt -p; set +o; alias -p; trap -p; umask; echo "$-"; pwd; pwd -P; env`

// volatileVar matches the lines of shellStateDump that differ between
// any two shells: process ids, clocks, counters and the session marker.
var volatileVar = regexp.MustCompile(`^(declare -[-a-zA-Z]+ )?(BASHPID|BASH_COMMAND|BASH_LINENO|BASH_SOURCE|BASH_ARGC|BASH_ARGV|FUNCNAME|LINENO|RANDOM|SRANDOM|SECONDS|EPOCHSECONDS|EPOCHREALTIME|HISTCMD|PPID|PIPESTATUS|COLUMNS|LINES|` + MarkerEnv + `)=`)

func stableState(out string) string {
	lines := strings.Split(out, "\n")
	lines = slices.DeleteFunc(lines, func(l string) bool { return volatileVar.MatchString(l) })
	return rcFuncName.ReplaceAllString(strings.Join(lines, "\n"), "__msb_rc_")
}

// rcFuncName is the session's function that sets $?, named after its marker.
var rcFuncName = regexp.MustCompile(`__msb_rc_[0-9a-f]+`)

// TestAdopt starts a shell with one environment and working directory,
// adopts it for another, and compares everything its first command sees
// with what a shell started with the other sees: variables changed,
// added and removed, PATH and HOME, SHLVL, PWD through a symlink, OLDPWD
// a directory or not, the caller's directory. Where the two could
// differ (LANG, a shell that ran a command) it refuses, changing nothing.
func TestAdopt(t *testing.T) {
	root := t.TempDir()
	work := filepath.Join(root, "work")
	os.Mkdir(work, 0o755)
	os.Symlink(work, filepath.Join(root, "link"))
	base := []string{"PATH=/usr/bin:/bin", "HOME=/root", "TERM=dumb", "LANG=C.UTF-8", "EXTRA=1"}
	spare := Options{Env: base, Dir: "/"}
	for _, tc := range []struct {
		name string
		to   Options
	}{
		{"Changed", Options{Env: []string{"PATH=/opt/venv/bin:/usr/bin:/bin", "HOME=" + work, "TERM=dumb", "LANG=C.UTF-8",
			"FOO=a'b $x \\ \"q\"", "SHLVL=1", "PWD=" + work, "OLDPWD=/nonexistent", "EMPTY="}, Dir: work}},
		{"OldpwdDir", Options{Env: append(slices.Clone(base), "OLDPWD="+root, "SHLVL=3"), Dir: work}},
		{"Symlink", Options{Env: append(slices.Clone(base), "PWD="+filepath.Join(root, "link")), Dir: filepath.Join(root, "link")}},
		{"StalePWD", Options{Env: append(slices.Clone(base), "PWD=/usr"), Dir: work}},
		{"CallersDir", Options{Env: base}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fresh := startSession(t, tc.to)
			s := startSession(t, spare)
			pid, _, unused := s.ShellState()
			if !unused {
				t.Fatal("a new session's shell is not reported unused")
			}
			if err := s.Adopt(context.Background(), tc.to); err != nil {
				t.Fatalf("Adopt: %v", err)
			}
			// The first command sees $? and $_ as the setup left them.
			const first = `printf '%s|%s|' "$?" "$_"; echo $$`
			wantOut, gotOut := sh(t, fresh, first).Output, sh(t, s, first).Output
			if w, g := wantOut[:strings.LastIndexByte(wantOut, '|')], gotOut[:max(0, strings.LastIndexByte(gotOut, '|'))]; g != w {
				t.Errorf("the first command's $?|$_: %q, a new shell's %q", g, w)
			}
			if !strings.HasSuffix(gotOut, "|"+strconv.Itoa(pid)+"\n") {
				t.Fatalf("the adopted session's first command printed %q, want its shell %d", gotOut, pid)
			}
			want := stableState(sh(t, fresh, shellStateDump).Output)
			got := stableState(sh(t, s, shellStateDump).Output)
			if got != want {
				t.Errorf("adopted shell differs from a new one:\n%s", lineDiff(want, got))
			}
		})
	}
	t.Run("Refused", func(t *testing.T) {
		s := startSession(t, spare)
		other := Options{Env: []string{"PATH=/usr/bin:/bin", "HOME=/root", "TERM=dumb", "LANG=C", "EXTRA=1"}, Dir: work}
		if err := s.Adopt(context.Background(), other); !errors.Is(err, ErrNotAdoptable) {
			t.Fatalf("Adopt with another LANG: %v, want ErrNotAdoptable", err)
		}
		if err := s.Adopt(context.Background(), Options{Env: slices.DeleteFunc(slices.Clone(base), func(kv string) bool { return strings.HasPrefix(kv, "HOME=") })}); !errors.Is(err, ErrNotAdoptable) {
			t.Fatalf("Adopt without HOME: %v, want ErrNotAdoptable", err)
		}
		expectOutput(t, s, `echo "$LANG $PWD"`, "C.UTF-8 /\n", 0)
		if _, _, unused := s.ShellState(); unused {
			t.Fatal("a session that ran a command is reported unused")
		}
		if err := s.Adopt(context.Background(), spare); !errors.Is(err, ErrNotAdoptable) {
			t.Fatalf("Adopt of a shell that ran a command: %v, want ErrNotAdoptable", err)
		}
	})
}

// lineDiff lists the lines only in want (-) and only in got (+).
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for _, l := range w {
		if !slices.Contains(g, l) {
			b.WriteString("- " + l + "\n")
		}
	}
	for _, l := range g {
		if !slices.Contains(w, l) {
			b.WriteString("+ " + l + "\n")
		}
	}
	return b.String()
}
