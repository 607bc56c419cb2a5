package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"

	"github.com/minisandbox/msb/internal/sandbox/sbinit"
)

// nsStage is a command that runs this binary's init stage stage
// (sbinit.EnvStage) in the user namespace of process pid: nsenter(1)
// joins it and executes the binary, since a Go process cannot join a user
// namespace itself (setns(2) wants a single-threaded caller). opts are
// nsenter's options besides --user and --target. The command dies with
// its parent; ctx kills it (context.Background for a stage that must not
// be cut short). It runs os.Executable, not rt.exe: msb-sandbox has none
// of the stages run so (tree, reset-root, shift).
func nsStage(ctx context.Context, pid int, stage string, opts ...string) (*exec.Cmd, error) {
	nsenter, err := exec.LookPath("nsenter")
	if err != nil {
		return nil, fmt.Errorf("%w (util-linux's nsenter)", err)
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding the msb executable: %w", err)
	}
	args := append(append([]string{"--user"}, opts...), "--target", strconv.Itoa(pid), "--", exe)
	cmd := exec.CommandContext(ctx, nsenter, args...)
	cmd.Env = []string{sbinit.EnvStage + "=" + stage}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd, nil
}

// stageErr is err of a stage's command with what the stage said on
// stderr, when it exited with a message.
func stageErr(err error, stderr *bytes.Buffer) error {
	var ee *exec.ExitError
	if msg := strings.TrimSpace(stderr.String()); errors.As(err, &ee) && msg != "" {
		return fmt.Errorf("%w: %s", err, msg)
	}
	return err
}
