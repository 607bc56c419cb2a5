package e2b

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path"
	"strconv"
	"strings"

	"connectrpc.com/connect"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/engine"
	"github.com/minisandbox/msb/internal/server/e2b/envd/filesystem"
)

// Users. E2B runs every command and file call as a user of the sandbox:
// the one the call names (the SDK's user=..., which it sends as the user
// name of a Basic Authorization header on RPCs and as the username query
// of /files), else the sandbox's default user: its template's USER, else
// `user` on a base whose root has that user (defaultUser). A name is
// looked up, as envd does, in the sandbox's own /etc/passwd at each call
// (a user added by a command counts); a name the sandbox lacks is E2B's
// error (invalid username), never a silent run as another user.
//
// msb runs a sandbox as one user: root on the bases and on templates
// built here (unless an image's USER says otherwise). A command for
// another user is switched to it by setpriv (util-linux) with the user's
// groups, HOME, USER and LOGNAME, as envd starts it with the user's
// credentials; a command for the user the sandbox runs as is not
// switched. A sandbox that runs as another user than root cannot switch
// (its supervisor holds no capabilities): the command fails with
// setpriv's error. A rootless sandbox running as root maps root only: a
// user whose ids it does not map is refused before anything runs (see
// docs/images.md, "The image's user in rootless sandboxes").

// e2bUser is E2B's user of its base template.
const e2bUser = "user"

// sysUser is a user of a sandbox's /etc/passwd.
type sysUser struct {
	name     string
	uid, gid int
	home     string
}

// errNoUser: the sandbox has no such user, or cannot act as it.
var errNoUser = errors.New("invalid username")

// rpcUser is the user an RPC names: the user name of its Basic
// Authorization header; "" when it names none.
func rpcUser(h http.Header) string {
	name, _, ok := (&http.Request{Header: h}).BasicAuth()
	if !ok {
		return ""
	}
	return name
}

// userOf resolves name, or b's default user when name is "", in sb's
// /etc/passwd. nil: no user named and no default, or a default the
// sandbox cannot act as (a template's USER in a rootless sandbox that
// maps root only), so the call acts as the sandbox's own user.
func (f *Front) userOf(ctx context.Context, b *box, sb *engine.Sandbox, name string) (*sysUser, error) {
	if name != "" {
		u, err := lookupUser(ctx, sb, name)
		if errors.Is(err, errNoUser) && name == e2bUser && f.onHostBase(b) {
			return nil, nil // the host's directories have no `user`: their root stands in for it
		}
		return u, err
	}
	if b.user == "" {
		return nil, nil
	}
	u, err := lookupUser(ctx, sb, b.user)
	if errors.Is(err, errNoUser) {
		return nil, nil
	}
	return u, err
}

// onHostBase reports whether b is a sandbox of the base template on the
// host's system directories, whose /etc is the host's and has no E2B
// user: there E2B's `user` is the sandbox's own user, so that code that
// names it (the SDK's signed URLs do) runs as it did before users.
func (f *Front) onHostBase(b *box) bool {
	return f.base == "" && (b.template == baseTemplate || b.template == "")
}

// lookupUser finds name, a user name or a uid, in sb's /etc/passwd, and
// checks that sb can act as that user.
func lookupUser(ctx context.Context, sb *engine.Sandbox, name string) (*sysUser, error) {
	data, err := sb.ReadFile(ctx, "/etc/passwd", 4<<20)
	if err != nil && engine.Kind(err) != api.CodeNotFound {
		return nil, fmt.Errorf("reading the sandbox's /etc/passwd to find user '%s': %w", name, err)
	}
	u, ok := lookupPasswd(data, name)
	if !ok && (name == "root" || name == "0") { // a root without /etc/passwd still has root
		u, ok = &sysUser{name: "root", home: "/root"}, true
	}
	if !ok {
		return nil, fmt.Errorf("%w: '%s': the sandbox's /etc/passwd has no such user", errNoUser, name)
	}
	if err := mapsUser(sb.InitPid(), u); err != nil {
		return nil, err
	}
	return u, nil
}

// lookupPasswd finds name, a user name or a uid, in /etc/passwd's data.
func lookupPasswd(data []byte, name string) (*sysUser, bool) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Split(sc.Text(), ":")
		if len(f) < 7 || f[0] != name && f[2] != name {
			continue
		}
		uid, err1 := strconv.Atoi(f[2])
		gid, err2 := strconv.Atoi(f[3])
		if err1 != nil || err2 != nil {
			continue
		}
		return &sysUser{name: f[0], uid: uid, gid: gid, home: f[5]}, true
	}
	return nil, false
}

// mapsUser checks that the user namespace of the sandbox whose init is
// pid maps u's uid and gid (in root mode every id is mapped).
func mapsUser(pid int, u *sysUser) error {
	for _, m := range []struct {
		file string
		id   int
	}{{"uid_map", u.uid}, {"gid_map", u.gid}} {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, m.file))
		if err != nil {
			return fmt.Errorf("reading the sandbox's %s: %w", m.file, err)
		}
		if !idMapped(data, m.id) {
			return fmt.Errorf("%w: '%s': this rootless sandbox runs as root and maps no id %d (%s); "+
				"a template whose USER is that user runs in a namespace that maps it", errNoUser, u.name, m.id, m.file)
		}
	}
	return nil
}

// idMapped reports whether a uid_map or gid_map maps id inside.
func idMapped(data []byte, id int) bool {
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			continue
		}
		inside, err1 := strconv.ParseInt(f[0], 10, 64)
		count, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 == nil && err2 == nil && int64(id) >= inside && int64(id) < inside+count {
			return true
		}
	}
	return false
}

// asUser is bash source that runs script as u: switched to u by setpriv
// when the shell runs as another uid, else in the shell itself; HOME,
// USER and LOGNAME are u's either way. nil u: script. (A terminal's
// script(1) runs it in sh, which has no $EUID: id answers there.)
func asUser(u *sysUser, script string) string {
	if u == nil {
		return script
	}
	env := "HOME=" + shellWord(u.home) + " USER=" + shellWord(u.name) + " LOGNAME=" + shellWord(u.name)
	return fmt.Sprintf(`if [ "${EUID:-$(id -u)}" != %d ]; then %s exec setpriv --reuid=%d --regid=%d --init-groups -- /bin/bash -c %s; fi; export %s; %s`,
		u.uid, env, u.uid, u.gid, shellWord(script), env, script)
}

// userError is err of a user lookup as the RPC error envd gives.
func userError(err error) error {
	if errors.Is(err, errNoUser) {
		return connect.NewError(connect.CodeUnauthenticated, err)
	}
	return connectError(err)
}

// ids is a sandbox's user and group names by id, for file entries' owner
// and group.
type ids struct {
	users, groups map[int]string
}

// idsOf reads sb's /etc/passwd and /etc/group; what it cannot read
// leaves ids unnamed (their numbers stand for them).
func idsOf(ctx context.Context, sb *engine.Sandbox) ids {
	out := ids{users: map[int]string{}, groups: map[int]string{}}
	for file, m := range map[string]map[int]string{"/etc/passwd": out.users, "/etc/group": out.groups} {
		data, _ := sb.ReadFile(ctx, file, 4<<20)
		for _, line := range strings.Split(string(data), "\n") {
			f := strings.Split(line, ":")
			if len(f) < 3 {
				continue
			}
			if id, err := strconv.Atoi(f[2]); err == nil {
				if _, seen := m[id]; !seen {
					m[id] = f[0]
				}
			}
		}
	}
	return out
}

// idName is the name of id in m, else id as a number.
func idName(m map[int]string, id int) string {
	if n, ok := m[id]; ok {
		return n
	}
	return strconv.Itoa(id)
}

// defaultUser is the default user of a new sandbox of template: its
// USER, else E2B's `user` on a base whose root has that user; a sandbox
// of a snapshot (and so a fork's child) has the one of the sandbox the
// snapshot was taken of.
func (f *Front) defaultUser(template string) string {
	if t := f.templateByRef(template); t != nil {
		if _, conf, ok := t.ready(); ok {
			return conf.User
		}
		return ""
	}
	if template == baseTemplate || template == "" {
		return f.baseUser
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.snapUsers[template]
}

// writeAs writes data to p (0644) for u: owned by u from its creation
// on, as envd's write (nil u: by the sandbox's user).
func writeAs(ctx context.Context, sb *engine.Sandbox, u *sysUser, p string, data []byte) error {
	if !owns(u) {
		return sb.WriteFile(ctx, p, data, 0o644)
	}
	return sb.WriteFileAs(ctx, p, data, 0o644, u.uid, u.gid)
}

// owns reports whether what a file call for u writes must be given to u.
func owns(u *sysUser) bool { return u != nil && (u.uid != 0 || u.gid != 0) }

// chown gives paths to u (nil: left as they are), as a file call for u
// leaves the directories it made. Root's are root's already: the sandbox's file calls
// write as root, or as the only user it has.
func chown(ctx context.Context, sb *engine.Sandbox, u *sysUser, paths ...string) error {
	if !owns(u) || len(paths) == 0 {
		return nil
	}
	return run(ctx, sb, append([]string{"chown", "-h", fmt.Sprintf("%d:%d", u.uid, u.gid), "--"}, paths...)...)
}

// own sets info's owner and group from e's ids.
func (n ids) own(info *filesystem.EntryInfo, e api.FileEntry) {
	info.Owner, info.Group = idName(n.users, e.UID), idName(n.groups, e.GID)
}

// missingDirs is dir and those of its parents that do not exist yet,
// deepest first: what writing a file under dir makes, which chown gives
// to u (none when chown would not).
func missingDirs(ctx context.Context, sb *engine.Sandbox, u *sysUser, dir string) []string {
	if !owns(u) {
		return nil
	}
	var out []string
	for ; dir != "/"; dir = path.Dir(dir) {
		if _, err := sb.Stat(ctx, dir); err == nil {
			break
		}
		out = append(out, dir)
	}
	return out
}

// filesUserError answers a /files request whose user the sandbox lacks
// as envd does: 401.
func filesUserError(w http.ResponseWriter, err error) {
	if errors.Is(err, errNoUser) {
		apiError(w, api.CodeUnauthorized, "%v", err)
		return
	}
	engineError(w, err)
}
