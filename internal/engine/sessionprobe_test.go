package engine

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/session"
)

func TestParseStateProbe(t *testing.T) {
	head := probeStart + "\ndeclare -x LANG=\"C.UTF-8\"\ndeclare -x PWD=\"/a\"\n" + probeExported + "\n"
	tail := probeFunctions + "\ndeclare -f __msb_rc_0\n"
	for _, c := range []struct {
		name, out string
		cwd       string
		env       []string // nil: not ok
	}{
		{"plain", head + "declare -x HOME=\"/root\"\ndeclare -x LANG=\"C.UTF-8\"\ndeclare -x OLDPWD\ndeclare -x PWD=\"/a\"\ndeclare -x SHLVL=\"1\"\n" + tail,
			"/a", []string{"HOME=/root", "LANG=C.UTF-8"}},
		{"double quotes", head + "declare -x A=\"q\\\"d\\$b\\`k\\\\s\nline\"\n" + tail,
			"/a", []string{"A=q\"d$b`k\\s\nline"}},
		{"ANSI-C", head + "declare -x A=$'a\\nb\\\\c\\377\"$`\\t\\E\\'x'\n" + tail,
			"/a", []string{"A=a\nb\\c\xff\"$`\t\x1b'x"}},
		{"a byte the output escaped", head + "declare -x A=\"x\\xffy\\\\xff\"\n" + tail,
			"/a", []string{"A=x\xffy\\xff"}},
		{"arrays, integers and unset ones", head + "declare -ax AR=([0]=\"1\" [1]=$'x\\ny')\ndeclare -ix I=\"5\"\ndeclare -x E=\"\"\ndeclare -x U\n" + tail,
			"/a", []string{"I=5", "E="}},
		{"no PWD", probeStart + "\n" + probeExported + "\n" + tail, "", []string{}},
		{"an exported function", head + tail + "declare -fx f\n", "", nil},
		{"a name reference", head + "declare -nx R=\"A\"\n" + tail, "", nil},
		{"a multibyte locale", probeStart + "\ndeclare -- LANG=\"ja_JP.SJIS\"\n" + probeExported + "\n" + tail, "", nil},
		{"LC_ALL over LANG", probeStart + "\ndeclare -x LC_ALL=\"de_DE.utf8@euro\"\ndeclare -- LANG=\"ja_JP.SJIS\"\n" + probeExported + "\n" + tail, "", []string{}},
		{"an escape bash does not write", head + "declare -x A=\"a\\qb\"\n" + tail, "", nil},
		{"cut short", head + "declare -x A=\"abc\n", "", nil},
		{"no functions part", head + "declare -x A=\"b\"\n", "", nil},
		{"od's answer", "2f 00 41 3d 62 00\n", "", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			cwd, env, ok := parseStateProbe(c.out)
			if ok != (c.env != nil) || ok && (cwd != c.cwd || !slices.Equal(env, c.env)) {
				t.Fatalf("got %q %q %v, want %q %q", cwd, env, ok, c.cwd, c.env)
			}
		})
	}
}

// TestSnapshotSessionProbe asks a real session's shell for its state
// with the builtins' probe and with od's, in states chosen to tell them
// apart: both answers agree, and the shell is as it was after them.
func TestSnapshotSessionProbe(t *testing.T) {
	e := snapshotEngine(t)
	ctx := context.Background()
	s := hostSandbox(t, e)
	if err := s.OpenSession(ctx, api.SessionRequest{Name: "main"}); err != nil {
		t.Fatal(err)
	}
	ask := func(command string) string {
		t.Helper()
		res, err := s.sbox().SessionExec(ctx, "main", session.ExecRequest{Command: command, SeparateStderr: true})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("%q: %v %+v", command, err, res)
		}
		return res.Output
	}
	sorted := func(env api.List[string]) []string { return slices.Sorted(slices.Values(env)) }
	for _, c := range []struct {
		name, setup string
		builtins    bool // sessionProbe's answer is used
	}{
		{"values bash quotes", `export A1=$'a\nb\\c\xff"$` + "`" + `\t\e' A2 A3= U=$'caf\xc3\xa9 \xe2\x82\xac' SP='x  y' Q="it's"; B=no; declare -ax AR=(1 2); declare -ix I=5; readonly RO=1; export RO; mkdir -p $'/tmp/d ir\nx' && cd $'/tmp/d ir\nx'`, true},
		{"no PWD", `unset PWD`, true},
		{"set -eu and IFS", `set -eu; IFS=,; cd /usr`, true},
		{"an exported function", `f() { echo "f $1"; }; export -f f`, false},
		{"a multibyte locale", `LANG=ja_JP.SJIS`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ask(c.setup)
			cwd, env, ok := parseStateProbe(ask(sessionProbe))
			if ok != c.builtins {
				t.Fatalf("builtins' answer used: %v, want %v", ok, c.builtins)
			}
			odCwd, odEnv := parseProbe(ask(sessionProbeOd))
			if ok && (cwd != odCwd || !slices.Equal(sorted(env), sorted(odEnv))) {
				t.Fatalf("the builtins' probe says %q %q,\nod's %q %q", cwd, sorted(env), odCwd, sorted(odEnv))
			}
			cwd, env, err := s.probeSession(ctx, "main")
			if err != nil || cwd != odCwd || !slices.Equal(sorted(env), sorted(odEnv)) {
				t.Fatalf("probeSession: %q %q %v, od's %q %q", cwd, sorted(env), err, odCwd, sorted(odEnv))
			}
		})
	}
	if got := ask(`echo "$-|$IFS|$(f x)|$PWD"`); !strings.Contains(strings.Split(got, "|")[0], "e") || !strings.Contains(strings.Split(got, "|")[0], "u") || !strings.HasSuffix(got, "|,|f x|/usr\n") {
		t.Fatalf("the shell after the probes: %q", got)
	}
}
