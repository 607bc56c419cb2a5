package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"

	"github.com/minisandbox/msb/internal/sandbox/sbinit"
	"github.com/minisandbox/msb/internal/sandbox/wire"
)

// A Shifter gives a rootless sandbox whose user is not root the owners of
// its lower layers (Config.Owners) without chowning them in its overlay,
// where each chown copies the file up into the sandbox's writable layer:
// it returns the layers init mounts (bottom first), with a shifted copy
// of the owned paths among them (files of the caller's subordinate ids,
// as the sandbox's user namespace shows them: see Shift), and the owners
// init must still give. Given layers it cannot shift (not the store's),
// it returns them and owners as they are. base, when above 0 and below
// len(layers), is how many bottom layers are an image's own
// (Config.ImageLayers): the shifted layer of those comes first, shared by
// every stack on the image. package envcache has one over its store
// (Runtime.SetShifter).
type Shifter func(ctx context.Context, layers []string, base int, owners []Owner) ([]string, []Owner, error)

// SetShifter has the runtime's sandboxes (and their resets) give their
// owners through f.
func (rt *Runtime) SetShifter(f Shifter) { rt.shift = f }

// shifted is layers and owners as init gets them (see Shifter): as they
// are but for a rootless sandbox whose user is not root, on a runtime with
// a Shifter. A shift that fails leaves init to chown, as before, and says
// why in the log.
func (s *Sandbox) shifted(ctx context.Context, layers []string, owners []Owner) ([]string, []Owner) {
	if s.rt.shift == nil || !s.rt.rootless || s.conf.User == (User{}) || len(owners) == 0 || len(layers) == 0 {
		return layers, owners
	}
	base := s.conf.ImageLayers // a fork's or a reset's layers keep the image's at the bottom
	if base >= len(layers) {
		base = 0
	}
	l, o, err := s.rt.shift(ctx, layers, base, owners)
	if err != nil {
		s.rt.log.Warn("giving the image's owners in the sandbox's overlay instead of a shifted layer", "sandbox", s.ID, "owners", len(owners), "err", err)
		return layers, owners
	}
	return l, o
}

// SubIDMaps names the id maps a rootless sandbox whose user is not root
// has (the caller as 0, then its subordinate ranges): a shifted layer made
// under other maps has other owners on disk, so its key holds them.
func SubIDMaps() (string, error) {
	uids, gids, err := userMaps(User{})
	if err != nil {
		return "", err
	}
	return "uid " + strings.Join(uids, " ") + "; gid " + strings.Join(gids, " "), nil
}

// Shift carries out plan (sbinit.StageShift) as root of a user namespace
// with the maps SubIDMaps names: a holder process (sbinit.StageHold) makes
// the namespace, newuidmap and newgidmap write its maps, and nsenter(1)
// starts this binary's shift stage in it (a Go process cannot join a user
// namespace itself). The stage keeps the host's mount namespace, so the
// plan's paths are the host's.
func Shift(ctx context.Context, plan wire.ShiftPlan) error {
	uids, gids, err := userMaps(User{})
	if err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding the msb executable: %w", err)
	}
	in, err := json.Marshal(plan)
	if err != nil {
		return err
	}
	hold := exec.Command(exe)
	hold.Env = []string{sbinit.EnvStage + "=" + sbinit.StageHold}
	hold.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER, Pdeathsig: syscall.SIGKILL}
	release, err := hold.StdinPipe()
	if err != nil {
		return err
	}
	if err := hold.Start(); err != nil {
		return fmt.Errorf("making a user namespace: %w", err)
	}
	defer func() {
		release.Close()
		hold.Wait()
	}()
	if err := mapIDs(hold.Process.Pid, uids, gids); err != nil {
		return err
	}
	cmd, err := nsStage(ctx, hold.Process.Pid, sbinit.StageShift)
	if err != nil {
		return err
	}
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return stageErr(err, &stderr)
	}
	return nil
}
