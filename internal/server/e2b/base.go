package e2b

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/engine"
)

// The base template's root. By default it is the host's system
// directories: read-only /usr and /etc, commands as root, no user `user`,
// nothing to build. UseBase puts it on a root msb's cache holds instead,
// made for E2B: an msb-built Debian base (docs/e2b.md, "The E2B base"). A
// root whose /etc/passwd has E2B's user `user` is used as it is; one
// without gets it once: a sandbox on the root runs userScript as root and
// its snapshot, named by the root (e2b-template-base-<hash>), is the base from then
// on. The snapshot stays in the cache, so the next daemon on the same
// root finds it and builds nothing. Sandboxes of the base run as root and
// their commands and file calls as `user` unless a call names another
// (users.go), as E2B's base does.

// userScript gives a root E2B's user: `user`, uid and gid 1000, home
// /home/user (with /etc/skel's files), bash, and passwordless sudo where
// the root has sudo. It edits the account files itself, so it needs no
// useradd.
const userScript = `set -e
if ! grep -q '^user:' /etc/passwd; then
  echo 'user:x:1000:1000::/home/user:/bin/bash' >>/etc/passwd
  grep -q '^user:' /etc/group || echo 'user:x:1000:' >>/etc/group
  if [ -e /etc/shadow ]; then echo 'user:*:19000:0:99999:7:::' >>/etc/shadow; fi
  if [ -e /etc/gshadow ]; then echo 'user:!::' >>/etc/gshadow; fi
fi
mkdir -p /home/user
if [ -d /etc/skel ]; then cp -rT /etc/skel /home/user; fi
chown -R 1000:1000 /home/user
if [ -d /etc/sudoers.d ]; then
  echo 'user ALL=(ALL:ALL) NOPASSWD: ALL' >/etc/sudoers.d/90-e2b-user
  chmod 0440 /etc/sudoers.d/90-e2b-user
fi
`

// errBase: the root given for the base template cannot be its root.
var errBase = errors.New("the E2B base")

// UseBase makes image, a root msb's cache holds (an image, debian/<name>,
// a snapshot...), the base template's root, with E2B's user `user` as its
// sandboxes' default user, adding that user to it first when it lacks
// one. Call it before Serve. It needs root mode: a rootless sandbox that
// runs as root maps no other user.
func (f *Front) UseBase(ctx context.Context, image string) error {
	if f.e.Mode() != "root" {
		return fmt.Errorf("%w %s: needs msb in root mode (this one is %s): a rootless sandbox running as root maps no user but root, so E2B's user could not run commands; leave --e2b-base out to use the host's directories", errBase, image, f.e.Mode())
	}
	ir, err := f.e.Cache().ImageRoot(ctx, image)
	if err != nil {
		return fmt.Errorf("%w %s: %w (build one with msb cache base build, see docs/e2b.md)", errBase, image, err)
	}
	sum := sha256.Sum256([]byte(ir.Ref + "\n" + strings.Join(ir.Layers, "\n")))
	_, lookErr := engine.ImageUser(ir.Layers, e2bUser)
	ir.Lease.Release()
	if lookErr == nil {
		f.base, f.baseUser = image, e2bUser
		return nil
	}
	snap := templatePrefix + "base-" + hex.EncodeToString(sum[:8]) // left out of list_snapshots, as builds are
	start := time.Now()
	made, err := f.userSnapshot(ctx, image, snap)
	if err != nil {
		return fmt.Errorf("%w %s: adding user %q: %w", errBase, image, e2bUser, err)
	}
	f.base, f.baseUser = "snapshot/"+snap, e2bUser
	f.log.Info("e2b base", "root", image, "snapshot", snap, "user_added", made, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// userSnapshot makes the snapshot snap of image with userScript run in
// it, unless the cache holds it already; made says whether it did.
func (f *Front) userSnapshot(ctx context.Context, image, snap string) (made bool, err error) {
	if ir, err := f.e.Cache().ImageRoot(ctx, "snapshot/"+snap); err == nil {
		ir.Lease.Release()
		return false, nil
	}
	sb, err := f.e.CreateSandbox(ctx, engine.SandboxRequest{Image: image, Network: engine.NetworkNone, Lifetime: -1, IdleTimeout: -1})
	if err != nil {
		return false, fmt.Errorf("starting a sandbox on it: %w", err)
	}
	defer f.e.CloseSandbox(sb.ID())
	if err := runUserScript(ctx, sb); err != nil {
		return false, err
	}
	if _, err := f.e.Snapshot(ctx, sb.ID(), api.SnapshotRequest{Name: snap}); err != nil {
		return false, fmt.Errorf("keeping it: %w", err)
	}
	if err := f.e.WaitSnapshot(ctx, snap); err != nil { // durable before its source closes
		return false, fmt.Errorf("keeping it: %w", err)
	}
	return true, nil
}

// addUser gives the root of the build sandbox sb (made of sr) E2B's user
// when it lacks one, as E2B provisions every template with it (the SDK's
// from_dockerfile ends a Dockerfile without USER with USER user). It
// cannot where the root's /etc is the host's (the host base), where a
// sandbox running as root maps no other user (rootless), or where the
// root lacks the tools userScript runs (the build log says so and the
// build goes on): the template's sandboxes then act as their own user
// where its USER is `user`.
func (f *Front) addUser(ctx context.Context, sb *engine.Sandbox, b *build, sr engine.SandboxRequest) {
	if sr.HostBase || f.e.Mode() != "root" || onHost(ctx, f.e, sr.Image) {
		return
	}
	if _, err := lookupUser(ctx, sb, e2bUser); err == nil {
		return
	}
	if err := runUserScript(ctx, sb); err != nil {
		b.logf("warn", "base", "the root has no user %q and msb could not add it: %v", e2bUser, err)
		return
	}
	b.logf("info", "base", "added E2B's user %q (uid 1000, /home/user)", e2bUser)
}

// runUserScript runs userScript as root in sb.
func runUserScript(ctx context.Context, sb *engine.Sandbox) error {
	res, err := sb.Exec(ctx, api.ExecRequest{Command: userScript})
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("the script exited with code %d: %s", res.ExitCode, res.Stdout)
	}
	return nil
}

// onHost reports whether the root image names sits on the host's system
// directories (a snapshot of a host-base sandbox).
func onHost(ctx context.Context, e *engine.Engine, image string) bool {
	ir, err := e.Cache().ImageRoot(ctx, image)
	if err != nil {
		return false
	}
	ir.Lease.Release()
	return ir.HostBase
}

// sudoBin is where sandboxes on the E2B base find sudo, as on E2B's.
const sudoBin = "/usr/bin/sudo"

// sudoPath is the engine's SandboxRequest.Sudo for the front's sandboxes:
// on the E2B base (UseBase), a sudo their supervisor serves, since every
// process of a sandbox runs with no_new_privs and the base's setuid sudo
// refuses to run; "" on the host's directories, whose /usr is read-only
// and whose commands run as root already.
func (f *Front) sudoPath() string {
	if f.base == "" {
		return ""
	}
	return sudoBin
}
