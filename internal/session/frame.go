package session

import (
	"bytes"
	"strconv"
	"strings"
)

// nonceLen is the length of a nonce in hex digits (128 random bits).
const nonceLen = 32

// ansiCQuote writes s to b as one bash ANSI-C quoted word, $'...'. Only
// printable ASCII other than ', \ and ! is written as is; every other byte is
// written as \xNN (always two digits, which bash reads as one byte). The
// result is therefore one line of plain ASCII: it cannot end the frame's line
// early, cannot trigger history expansion, and does not depend on the shell's
// locale. s must not contain NUL, which bash strings cannot hold.
func ansiCQuote(b *strings.Builder, s string) {
	const hexDigits = "0123456789abcdef"
	b.WriteString("$'")
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\'' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '!' || c < 0x20 || c >= 0x7f:
			b.WriteString(`\x`)
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&0xf])
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('\'')
}

// framePaths are the named pipes, held open by the engine, that a frame
// opens by path (see doc.go).
type framePaths struct {
	stdin  string // never receives data
	stdout string
	stderr string // "" merges stderr into stdout
	status string
}

// buildFrame returns the single line the shell reads for one command:
//
//	\builtin eval $'<command>' <|stdin >|stdout 2>&1; \builtin printf '<nonce> %d\n' "$?" >|status
//
// The shell parses the whole line, nonce included, before the command runs.
// The redirections on eval apply to everything the command does and are
// undone when it returns, so `exec >/dev/null` or `exec 2>&-` in a command
// last only for that command. \builtin is quoted so that no alias applies;
// >| ignores noclobber.
func buildFrame(command, nonce string, p framePaths) string {
	var b strings.Builder
	b.Grow(len(command) + 256)
	b.WriteString(`\builtin eval `)
	ansiCQuote(&b, command)
	b.WriteString(" <")
	shellWord(&b, p.stdin)
	b.WriteString(" >|")
	shellWord(&b, p.stdout)
	if p.stderr == "" {
		b.WriteString(" 2>&1")
	} else {
		b.WriteString(" 2>|")
		shellWord(&b, p.stderr)
	}
	b.WriteString("; ")
	writeStatusCmd(&b, nonce, p.status)
	b.WriteByte('\n')
	return b.String()
}

// recoveryFrame reports the status of whatever the shell last ran under a
// second nonce; it is sent after a timeout once the interrupted shell is back
// at its input (the interrupt discarded the rest of the command's line). It
// then closes the descriptors in closeFDs.
func recoveryFrame(nonce, statusPath string, closeFDs []int) string {
	var b strings.Builder
	writeStatusCmd(&b, nonce, statusPath)
	if len(closeFDs) > 0 {
		b.WriteString(`; \builtin exec`)
		for _, fd := range closeFDs {
			b.WriteString(" " + strconv.Itoa(fd) + "<&-")
		}
	}
	b.WriteByte('\n')
	return b.String()
}

func writeStatusCmd(b *strings.Builder, nonce, statusPath string) {
	b.WriteString(`\builtin printf '`)
	b.WriteString(nonce)
	b.WriteString(` %d\n' "$?" >|`)
	shellWord(b, statusPath)
}

// shellWord writes a path as one shell word: as is when it holds only
// characters no shell treats specially, else single-quoted.
func shellWord(b *strings.Builder, p string) {
	plain := p != ""
	for i := 0; i < len(p) && plain; i++ {
		c := p[i]
		plain = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("/._-+", c) >= 0
	}
	if plain {
		b.WriteString(p)
		return
	}
	b.WriteByte('\'')
	b.WriteString(strings.ReplaceAll(p, "'", `'\''`))
	b.WriteByte('\'')
}

// statusParser splits the status channel into lines and finds the one that
// carries an expected nonce. Lines with other nonces (stale ones from earlier
// commands, or anything else written to the channel) are ignored, and so is a
// line longer than maxStatusLine, so a hostile writer cannot grow memory.
type statusParser struct {
	partial []byte
	discard bool // the current line is too long and is being skipped
}

const maxStatusLine = 128

// feed consumes data and reports the exit status of the first line whose
// nonce is one of want.
func (p *statusParser) feed(data []byte, want ...string) (code int, nonce string, ok bool) {
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			if !p.discard {
				p.partial = append(p.partial, data...)
				if len(p.partial) > maxStatusLine {
					p.partial, p.discard = p.partial[:0], true
				}
			}
			return 0, "", false
		}
		line := data[:i]
		data = data[i+1:]
		if p.discard {
			p.discard = false
			continue
		}
		if len(p.partial) > 0 {
			line = append(p.partial, line...)
			p.partial = p.partial[:0]
		}
		if code, n, ok := parseStatusLine(line, want); ok {
			return code, n, true
		}
	}
	return 0, "", false
}

// reset forgets a partial line (a new command starts; the channel is drained).
func (p *statusParser) reset() { p.partial, p.discard = p.partial[:0], false }

func parseStatusLine(line []byte, want []string) (int, string, bool) {
	if len(line) < nonceLen+2 || line[nonceLen] != ' ' {
		return 0, "", false
	}
	n := string(line[:nonceLen])
	match := false
	for _, w := range want {
		if w != "" && w == n {
			match = true
		}
	}
	if !match {
		return 0, "", false
	}
	code, err := strconv.Atoi(string(line[nonceLen+1:]))
	if err != nil || code < 0 || code > 255 {
		return 0, "", false
	}
	return code, n, true
}
