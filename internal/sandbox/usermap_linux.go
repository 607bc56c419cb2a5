package sandbox

import (
	"fmt"
	"os"
	"os/exec"

	"github.com/minisandbox/msb/internal/sandbox/wire"
)

// userMap is what a rootless sandbox whose user is not root needs to map
// the caller's subordinate ids (see subid_linux.go): the arguments of
// newuidmap and newgidmap, and the pipe on which init's first stage
// (sbinit.StageAwaitMap) waits until they have written its maps.
type userMap struct {
	uids, gids []string
	r, w       *os.File
}

// planUserMap is the sandbox's userMap: nil for a root-mode sandbox and a
// rootless one that runs as root, whose start stays as it was. The user's
// files live on the sandbox's own tmpfs disk, which goes with the sandbox:
// a host directory would keep files of subordinate ids that the caller
// cannot remove.
func (s *Sandbox) planUserMap() (*userMap, error) {
	u := s.conf.User
	if !s.rt.rootless || u == (User{}) {
		return nil, nil
	}
	if s.rt.diskFor(&s.conf) != diskTmpfs {
		return nil, invalid("user %d:%d: a rootless sandbox runs as a user other than root only with its writable layer "+
			"on a tmpfs disk of its own (a disk limit, no UpperDir, RootDir or KeepUpper; %s)", u.UID, u.GID, s.rt.disk().describe())
	}
	uids, gids, err := userMaps(u)
	if err != nil {
		return nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("making the user map pipe: %w", err)
	}
	return &userMap{uids: uids, gids: gids, r: r, w: w}, nil
}

// apply has the helpers write the maps of init's user namespace (init is
// pid), then lets init go on; on error init reads the end of the pipe and
// exits.
func (m *userMap) apply(pid int) error {
	defer m.w.Close()
	if err := mapIDs(pid, m.uids, m.gids); err != nil {
		return fmt.Errorf("mapping the sandbox's ids: %w", err)
	}
	if _, err := m.w.Write([]byte{1}); err != nil {
		return fmt.Errorf("letting sandbox init go on: %w", err)
	}
	return nil
}

// close closes both ends of the pipe (nil: nothing to close).
func (m *userMap) close() {
	if m != nil {
		m.r.Close()
		m.w.Close()
	}
}

// wireOwners is Config.Owners for init (nil for none).
func wireOwners(owners []Owner) []wire.Owner {
	if len(owners) == 0 {
		return nil
	}
	out := make([]wire.Owner, len(owners))
	for i, o := range owners {
		out[i] = wire.Owner(o)
	}
	return out
}

// userCheck is msb doctor's line on the users a sandbox can run as: any
// in root mode; rootless, root and the ids the caller's subordinate ranges
// map, with newuidmap and newgidmap to map them, and nsenter to snapshot
// such a sandbox (OpenWritable): without it they run, but their snapshots
// and forks fail.
func (rt *Runtime) userCheck() Check {
	c := Check{Name: "sandbox users", OK: true, Detail: "any uid and gid (root mode)"}
	if !rt.rootless {
		return c
	}
	c.Fix = "as root: apt-get install uidmap; usermod --add-subuids 100000-165535 --add-subgids 100000-165535 <user> " +
		"(an image's USER other than root needs them; docs/images.md)"
	uids, gids, err := userMaps(User{UID: 1, GID: 1})
	if err == nil {
		_, err = exec.LookPath("newuidmap")
	}
	if err == nil {
		_, err = exec.LookPath("newgidmap")
	}
	if err != nil {
		c.OK, c.Detail = false, "root only: "+err.Error()
		return c
	}
	c.Detail = fmt.Sprintf("root, and uids 1-%d and gids 1-%d through the caller's subordinate ids (newuidmap, newgidmap)",
		lastID(uids), lastID(gids))
	if _, err := exec.LookPath("nsenter"); err != nil {
		c.OK = false
		c.Detail += "; snapshots and forks of a sandbox whose user is not root fail: " + err.Error()
		c.Fix = "as root: apt-get install util-linux (its nsenter reads such a sandbox's writable layer in its user namespace; docs/images.md)"
		return c
	}
	c.Detail += "; their snapshots read through nsenter"
	return c
}
