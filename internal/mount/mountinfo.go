package mount

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// Info is one line of a mountinfo file (proc_pid_mountinfo(5)): a mount
// as a process's mount namespace shows it.
type Info struct {
	ID, Parent int    // the mount's id and its parent's
	Root       string // the dir of the filesystem mounted here
	Point      string // where it is mounted, relative to the process's root
	Options    string // per-mount options: "rw,nosuid,relatime"
	FSType     string
	Source     string
	// Super are the filesystem's (superblock's) options, split on commas.
	Super []string
}

// ReadMountinfo parses the mountinfo file at path, /proc/<pid>/mountinfo.
func ReadMountinfo(path string) ([]Info, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading mounts: %w", err)
	}
	defer f.Close()
	ms, err := ParseMountinfo(f)
	if err != nil {
		return nil, fmt.Errorf("reading mounts from %s: %w", path, err)
	}
	return ms, nil
}

// ParseMountinfo parses a mountinfo file's lines:
//
//	id parent major:minor root point options [optional fields...] - fstype source super-options
//
// The optional fields (shared:N, master:N) end at a lone "-". Paths
// (root, point, source) come unescaped: the kernel writes a space, tab,
// newline or backslash in them as an octal escape (\040).
func ParseMountinfo(r io.Reader) ([]Info, error) {
	var out []Info
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		m, err := parseMountinfoLine(sc.Text())
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

func parseMountinfoLine(line string) (Info, error) {
	fields := strings.Fields(line)
	sep := -1
	for i := 6; i < len(fields); i++ {
		if fields[i] == "-" {
			sep = i
			break
		}
	}
	if sep < 0 || len(fields) < sep+4 {
		return Info{}, fmt.Errorf("bad mountinfo line %q: want 6 fields, optional ones, \"-\" and 3 more", line)
	}
	id, err1 := strconv.Atoi(fields[0])
	parent, err2 := strconv.Atoi(fields[1])
	if err1 != nil || err2 != nil {
		return Info{}, fmt.Errorf("bad mountinfo line %q: its mount ids are not numbers", line)
	}
	return Info{ID: id, Parent: parent, Root: unescapeMountinfo(fields[3]), Point: unescapeMountinfo(fields[4]),
		Options: fields[5], FSType: fields[sep+1], Source: unescapeMountinfo(fields[sep+2]),
		Super: strings.Split(fields[sep+3], ",")}, nil
}

// unescapeMountinfo undoes the octal escapes (\040 for a space) of a path
// in mountinfo.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
