package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
)

// Subordinate ids: the ranges of host uids and gids that /etc/subuid and
// /etc/subgid give a user, which the setuid helpers newuidmap and newgidmap
// (Debian's uidmap package, what rootless podman uses) map into a user
// namespace the user owns. A rootless sandbox whose Config.User is not root
// runs in such a namespace: 0 is the caller, as in every rootless sandbox,
// and 1, 2, ... are the caller's subordinate ids in the files' order. Files
// the sandbox user makes are then owned, on the host, by a subordinate id.

// ErrNoSubIDs: a rootless sandbox's user is not root, and the caller has no
// subordinate id range (or one too small for that user) to map it to. The
// error is an ErrInvalidConfig too.
var ErrNoSubIDs = errors.New("no subordinate ids for the sandbox's user")

// Where the ranges are read from; tests point them elsewhere.
var (
	subUIDFile = "/etc/subuid"
	subGIDFile = "/etc/subgid"
)

// idRange is a line of /etc/subuid or /etc/subgid: count ids from start.
type idRange struct{ start, count int }

// subIDs reads the ranges file gives the user name or the numeric id
// (both spellings are valid in the files). No file is no range.
func subIDs(file, name string, id int) ([]idRange, error) {
	f, err := os.Open(file)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading subordinate ids: %w", err)
	}
	defer f.Close()
	var out []idRange
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		owner, rest, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":")
		if !ok || owner != name && owner != strconv.Itoa(id) {
			continue
		}
		s, c, _ := strings.Cut(rest, ":")
		start, err1 := strconv.Atoi(s)
		count, err2 := strconv.Atoi(c)
		if err1 == nil && err2 == nil && start > 0 && count > 0 {
			out = append(out, idRange{start, count})
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", file, err)
	}
	return out, nil
}

// idMap is a user namespace's map in newuidmap's arguments ("inside host
// count" triples): own as 0, then the ranges from 1 on. last is the
// highest id inside.
func idMap(own int, ranges []idRange) (args []string, last int) {
	args = []string{"0", strconv.Itoa(own), "1"}
	for _, r := range ranges {
		args = append(args, strconv.Itoa(last+1), strconv.Itoa(r.start), strconv.Itoa(r.count))
		last += r.count
	}
	return args, last
}

// lastID is the highest id inside that newuidmap's arguments map.
func lastID(args []string) int {
	if len(args) < 3 {
		return 0
	}
	inside, _ := strconv.Atoi(args[len(args)-3])
	count, _ := strconv.Atoi(args[len(args)-1])
	return inside + count - 1
}

// userMaps are the arguments of newuidmap and newgidmap (after the pid)
// for a sandbox whose user is u, or ErrNoSubIDs naming the file that lacks
// a range for it.
func userMaps(u User) (uids, gids []string, err error) {
	name := strconv.Itoa(os.Geteuid())
	if me, err := user.LookupId(name); err == nil {
		name = me.Username
	}
	uids, err = oneMap(subUIDFile, name, os.Geteuid(), "uid", u.UID)
	if err != nil {
		return nil, nil, err
	}
	gids, err = oneMap(subGIDFile, name, os.Getegid(), "gid", u.GID)
	return uids, gids, err
}

// oneMap is userMaps for one kind of id.
func oneMap(file, name string, own int, kind string, want int) ([]string, error) {
	ranges, err := subIDs(file, name, own)
	if err != nil {
		return nil, err
	}
	args, last := idMap(own, ranges)
	if want > last {
		return nil, fmt.Errorf("%w: %w: %s %d needs %s to give %s (%s %d) at least %d ids, it gives %d "+
			"(usermod --add-subuids/--add-subgids as root adds a range)", ErrInvalidConfig, ErrNoSubIDs, kind, want, file, name, kind, own, want, last)
	}
	return args, nil
}

// mapIDs has newuidmap and newgidmap write the maps of the user namespace
// of process pid.
func mapIDs(pid int, uids, gids []string) error {
	for _, m := range []struct {
		helper string
		args   []string
	}{{"newuidmap", uids}, {"newgidmap", gids}} {
		out, err := exec.Command(m.helper, append([]string{strconv.Itoa(pid)}, m.args...)...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s %d %s: %w: %s", m.helper, pid, strings.Join(m.args, " "), err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}
