package sudo

import (
	"bufio"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

// account is a user of the sandbox's /etc/passwd.
type account struct {
	name        string
	uid, gid    int
	home, shell string
}

// lookupUser finds name, or #uid, in the sandbox's /etc/passwd; a #uid
// it lacks is that uid with group 0, home / and /bin/sh, as sudo allows.
func lookupUser(name string) (account, error) {
	if n, ok := strings.CutPrefix(name, "#"); ok {
		uid, err := strconv.Atoi(n)
		if err != nil || uid < 0 {
			return account{}, fmt.Errorf("unknown user %s", name)
		}
		if a, err := lookupUID(uid); err == nil {
			return a, nil
		}
		return account{name: n, uid: uid, home: "/", shell: "/bin/sh"}, nil
	}
	a, ok := findPasswd(func(a account) bool { return a.name == name })
	if !ok {
		return account{}, fmt.Errorf("unknown user %s", name)
	}
	return a, nil
}

// lookupUID finds uid in the sandbox's /etc/passwd.
func lookupUID(uid int) (account, error) {
	a, ok := findPasswd(func(a account) bool { return a.uid == uid })
	if !ok {
		return account{}, fmt.Errorf("unknown uid %d", uid)
	}
	return a, nil
}

func findPasswd(match func(account) bool) (account, bool) {
	for _, f := range entries("/etc/passwd", 7) {
		uid, err1 := strconv.Atoi(f[2])
		gid, err2 := strconv.Atoi(f[3])
		if err1 != nil || err2 != nil {
			continue
		}
		a := account{name: f[0], uid: uid, gid: gid, home: f[5], shell: f[6]}
		if a.shell == "" {
			a.shell = "/bin/sh"
		}
		if match(a) {
			return a, true
		}
	}
	return account{}, false
}

// lookupGroup is the gid of a group name, or #gid.
func lookupGroup(name string) (int, error) {
	if n, ok := strings.CutPrefix(name, "#"); ok {
		if gid, err := strconv.Atoi(n); err == nil && gid >= 0 {
			return gid, nil
		}
	}
	for _, f := range entries("/etc/group", 4) {
		if f[0] == name {
			if gid, err := strconv.Atoi(f[2]); err == nil {
				return gid, nil
			}
		}
	}
	return 0, fmt.Errorf("unknown group %s", name)
}

// groupsOf is user's groups as initgroups makes them: gid and every group
// of /etc/group that lists user.
func groupsOf(user string, gid int) []int {
	out := []int{gid}
	for _, f := range entries("/etc/group", 4) {
		g, err := strconv.Atoi(f[2])
		if err == nil && !slices.Contains(out, g) && slices.Contains(strings.Split(f[3], ","), user) {
			out = append(out, g)
		}
	}
	return out
}

// entries are the lines of a colon-separated database with n fields.
func entries(path string, n int) [][]string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out [][]string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		if fs := strings.Split(line, ":"); len(fs) == n {
			out = append(out, fs)
		}
	}
	return out
}
