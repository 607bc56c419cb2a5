package engine

import (
	"encoding/hex"
	"slices"
	"strings"

	"github.com/minisandbox/msb/internal/api"
)

// A session's state (its working directory and exported variables) is
// asked of its shell by a snapshot: a fork's children and a rollback
// reopen their sessions in it. The shell answers with builtins only
// (sessionProbe: declare -p), no process started: the probe that piped
// env -0 into od forked three processes and execed two, which took 5 ms
// on a quiet machine and 10-40 ms under load, and a fork's child from a
// spare waited for it (docs/bench.md, session 14). declare quotes values
// as bash reads them back; parseStateProbe decodes that strictly, and
// whatever it cannot vouch for is asked again the old way
// (sessionProbeOd): a locale whose multibyte characters may hold a
// backslash (bash copies them whole into a quoted value), an exported
// function (env carries it as BASH_FUNC_name%%, declare -px does not
// list it), a name reference, or output it does not recognise.

// sessionProbe prints, with builtins only, the locale variables and
// $PWD, then the exported variables, then the functions' names and
// attributes, each part after a header line; no step can fail the
// command (set -e), nothing in the shell is changed.
const sessionProbe = `\builtin printf '%s\n' ` + probeStart + `; \builtin declare -p LC_ALL LC_CTYPE LANG PWD 2>/dev/null || \builtin true; ` +
	`\builtin printf '%s\n' ` + probeExported + `; \builtin declare -px; \builtin printf '%s\n' ` + probeFunctions + `; \builtin declare -F`

// The header lines of sessionProbe's parts.
const (
	probeStart     = "msb-probe-1"
	probeExported  = "msb-probe-exported"
	probeFunctions = "msb-probe-functions"
)

// sessionProbeOd prints the shell's working directory and exported
// environment, NUL-terminated each, in hex (a session's output shows NUL
// as the text \x00, which the output may hold too). It starts processes
// (env, od); sessionProbe's answer is used when it can be.
const sessionProbeOd = `{ printf '%s\0' "$PWD"; env -0; } | od -An -v -tx1`

// shellVars are set by bash itself: not carried to a reopened session.
var shellVars = []string{"PWD", "OLDPWD", "SHLVL", "_"}

// parseStateProbe reads sessionProbe's output: the shell's $PWD and its
// exported variables as env -0 would list them, less shellVars; ok is
// false when the answer cannot be vouched for (see the top of this file)
// and sessionProbeOd must be asked instead.
func parseStateProbe(out string) (cwd string, env api.List[string], ok bool) {
	rest, found := strings.CutPrefix(out, probeStart+"\n")
	if !found {
		return "", nil, false
	}
	env = api.List[string]{}
	part := probeStart
	locale := map[string]string{}
	for rest != "" {
		switch {
		case strings.HasPrefix(rest, probeExported+"\n") && part == probeStart:
			part, rest = probeExported, rest[len(probeExported)+1:]
			continue
		case strings.HasPrefix(rest, probeFunctions+"\n") && part == probeExported:
			part, rest = probeFunctions, rest[len(probeFunctions)+1:]
			continue
		case part == probeFunctions:
			// declare -F: "declare -f NAME" or "declare -fx NAME".
			line, next, _ := strings.Cut(rest, "\n")
			if flags, ok := declFlags(line); ok && strings.Contains(flags, "x") {
				return "", nil, false
			}
			rest = next
			continue
		}
		d, next, good := nextDecl(rest)
		if !good {
			return "", nil, false
		}
		rest = next
		if part == probeStart {
			if d.set && d.name == "PWD" {
				cwd = d.value
			} else if d.set {
				locale[d.name] = d.value
			}
			continue
		}
		switch {
		case strings.ContainsRune(d.flags, 'n'):
			return "", nil, false // a name reference: what does env hold?
		case !d.set || strings.ContainsAny(d.flags, "aA") || !strings.ContainsRune(d.flags, 'x'):
			// exported without a value, or an array: not in the environment
		case !slices.Contains(shellVars, d.name):
			env = append(env, d.name+"="+d.value)
		}
	}
	if part != probeFunctions || !plainLocale(locale) {
		return "", nil, false
	}
	return cwd, env, true
}

// plainLocale says whether the shell's character set (LC_ALL, else
// LC_CTYPE, else LANG, the first not empty) is one in which no byte of
// a multibyte character is a backslash or a quote: C, POSIX or UTF-8.
func plainLocale(vars map[string]string) bool {
	name := "C"
	for _, v := range []string{"LC_ALL", "LC_CTYPE", "LANG"} {
		if vars[v] != "" {
			name = vars[v]
			break
		}
	}
	if name == "C" || name == "POSIX" {
		return true
	}
	name, _, _ = strings.Cut(name, "@")
	_, charset, _ := strings.Cut(name, ".")
	charset = strings.ReplaceAll(strings.ToLower(charset), "-", "")
	return charset == "utf8"
}

// A decl is one variable as declare -p prints it:
// `declare -FLAGS NAME` or `declare -FLAGS NAME=VALUE`.
type decl struct {
	flags, name, value string
	set                bool // has a value
}

// declFlags is the flags of a declare line ("--" for none).
func declFlags(line string) (string, bool) {
	rest, ok := strings.CutPrefix(line, "declare -")
	if !ok {
		return "", false
	}
	flags, _, ok := strings.Cut(rest, " ")
	return flags, ok
}

// nextDecl reads the declare line at the start of s (its value may span
// lines, inside quotes) and returns it and what follows its newline.
func nextDecl(s string) (d decl, rest string, ok bool) {
	flags, ok := declFlags(s)
	if !ok {
		return decl{}, "", false
	}
	d.flags = flags
	s = s[len("declare -")+len(flags)+1:]
	i := 0
	for i < len(s) && isNameByte(s[i], i == 0) {
		i++
	}
	if i == 0 || i == len(s) {
		return decl{}, "", false
	}
	d.name, s = s[:i], s[i:]
	switch s[0] {
	case '\n':
		return d, s[1:], true
	case '=':
		d.set = true
		d.value, rest, ok = shellValue(s[1:])
		return d, rest, ok
	}
	return decl{}, "", false
}

func isNameByte(c byte, first bool) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || !first && c >= '0' && c <= '9'
}

// shellValue decodes the shell word at the start of s up to an unquoted
// newline, as declare -p writes a value: "..." (bash escapes ", \, $
// and ` in it with a backslash), $'...' (ANSI-C escapes), '...', or
// plain characters. A session's output shows a byte that is not UTF-8
// as \xNN, which is decoded too: bash writes a backslash only escaped.
// An escape bash does not write is not ok.
func shellValue(s string) (value, rest string, ok bool) {
	var b strings.Builder
	i := 0
	for i < len(s) {
		c := s[i]
		switch {
		case c == '\n':
			return b.String(), s[i+1:], true
		case c == '"':
			n, good := quoted(&b, s[i+1:], '"', func(b *strings.Builder, s string) (int, bool) {
				return backslash(b, s, `"\$`+"`")
			})
			if !good {
				return "", "", false
			}
			i += 1 + n
		case c == '$' && i+1 < len(s) && s[i+1] == '\'':
			n, good := quoted(&b, s[i+2:], '\'', ansiC)
			if !good {
				return "", "", false
			}
			i += 2 + n
		case c == '\'':
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				return "", "", false
			}
			b.WriteString(s[i+1 : i+1+end])
			i += end + 2
		case c == '\\':
			n, good := backslash(&b, s[i:], "")
			if !good {
				return "", "", false
			}
			i += n
		default:
			b.WriteByte(c)
			i++
		}
	}
	return "", "", false // no newline: cut short
}

// quoted decodes the quoted part at the start of s up to its closing
// quote q, each backslash escape by esc; it returns how many bytes it
// read, the closing quote included, and false when there is none or an
// escape is not ok.
func quoted(b *strings.Builder, s string, q byte, esc func(*strings.Builder, string) (int, bool)) (int, bool) {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case q:
			return i + 1, true
		case '\\':
			n, good := esc(b, s[i:])
			if !good {
				return 0, false
			}
			i += n - 1
		default:
			b.WriteByte(s[i])
		}
	}
	return 0, false
}

// backslash decodes the escape at the start of s (s[0] is a backslash):
// one of escaped, the character itself, or the output's \xNN, a byte.
// It returns how many bytes it read.
func backslash(b *strings.Builder, s, escaped string) (int, bool) {
	if len(s) >= 2 && strings.IndexByte(escaped, s[1]) >= 0 {
		b.WriteByte(s[1])
		return 2, true
	}
	if len(s) >= 4 && s[1] == 'x' {
		if v, err := hex.DecodeString(s[2:4]); err == nil {
			b.Write(v)
			return 4, true
		}
	}
	return 0, false
}

// ansiC decodes the ANSI-C escape at the start of s (s[0] is a
// backslash), as bash's $'...' reads it, and returns how many bytes it
// read: \a \b \e \E \f \n \r \t \v \\ \' \" \?, \NNN octal, \xHH hex
// (one or two digits; also the output's \xNN).
func ansiC(b *strings.Builder, s string) (int, bool) {
	if len(s) < 2 {
		return 0, false
	}
	if v, ok := ansiCSimple[s[1]]; ok {
		b.WriteByte(v)
		return 2, true
	}
	digits := func(from int, max int, base int, isDigit func(byte) bool) (int, bool) {
		n, v := 0, 0
		for n < max && from+n < len(s) && isDigit(s[from+n]) {
			v = v*base + hexValue(s[from+n])
			n++
		}
		if n == 0 || v > 0xff {
			return 0, false
		}
		b.WriteByte(byte(v))
		return from + n, true
	}
	switch c := s[1]; {
	case c >= '0' && c <= '7':
		return digits(1, 3, 8, func(c byte) bool { return c >= '0' && c <= '7' })
	case c == 'x':
		return digits(2, 2, 16, func(c byte) bool { return hexValue(c) >= 0 })
	}
	return 0, false
}

// ansiCSimple are the one-letter escapes of $'...'.
var ansiCSimple = map[byte]byte{'a': '\a', 'b': '\b', 'e': 0x1b, 'E': 0x1b, 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t', 'v': '\v',
	'\\': '\\', '\'': '\'', '"': '"', '?': '?'}

// hexValue is c's value as a hex digit, or -1.
func hexValue(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// parseProbe reads sessionProbeOd's output.
func parseProbe(out string) (cwd string, env api.List[string]) {
	env = api.List[string]{}
	raw, err := hex.DecodeString(strings.Join(strings.Fields(out), ""))
	if err != nil {
		return "", env
	}
	fields := strings.Split(strings.TrimSuffix(string(raw), "\x00"), "\x00")
	cwd = fields[0]
	for _, kv := range fields[1:] {
		name, _, ok := strings.Cut(kv, "=")
		if !ok || name == "" || slices.Contains(shellVars, name) {
			continue
		}
		env = append(env, kv)
	}
	return cwd, env
}
