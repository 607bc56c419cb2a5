package e2b

import (
	"context"
	"fmt"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/engine"
	"github.com/minisandbox/msb/internal/server/e2b/envd/process"
)

// A pty process is one started with StartRequest.pty: its command runs on
// a pseudo-terminal that util-linux's script(1) opens inside the sandbox.
// script reads the process's stdin FIFO (stdinPipe) and copies it to the
// terminal, and copies the terminal's output to its stdout, which the
// process streams as pty data. The terminal's device is written to a file
// beside the FIFO (ttyFile) so that Update can set its size with stty -F;
// the kernel then sends SIGWINCH to the terminal's foreground job.

// ttyFile is where a pty process's terminal device name is kept.
func ttyFile(s *stdinPipe) string { return s.path + ".tty" }

// ptyWrap is cmd run by script on a new terminal of size. The terminal's
// device is recorded in ttyFile(s) only once it has its size, so that a
// resize waiting for the file cannot be undone by the first size.
func ptyWrap(cmd string, s *stdinPipe, size *process.PTY_Size) string {
	inner := fmt.Sprintf("stty rows %d cols %d; tty >%s; %s", size.GetRows(), size.GetCols(), shellWord(ttyFile(s)), cmd)
	return "exec script -q -e -c " + shellWord(inner) + " /dev/null"
}

// resize sets the size of a pty process's terminal once script has
// opened it; exit 3 when the process is gone.
func resize(ctx context.Context, sb *engine.Sandbox, s *stdinPipe, size *process.PTY_Size) error {
	f := shellWord(ttyFile(s))
	cmd := "while [ ! -s " + f + " ]; do [ -p " + shellWord(s.path) + " ] || exit 3; sleep 0.005; done; " +
		fmt.Sprintf("stty -F \"$(cat %s)\" rows %d cols %d", f, size.GetRows(), size.GetCols())
	if err := s.run(ctx, sb, api.ExecRequest{Command: cmd}); err != nil {
		return fmt.Errorf("resizing the terminal: %w", err)
	}
	return nil
}

// inputOf is the bytes of in, whether sent as stdin or as pty input.
func inputOf(in *process.ProcessInput) []byte {
	if p := in.GetPty(); p != nil {
		return p
	}
	return in.GetStdin()
}

// ptySize is size, or 24 by 80 when the client gave none.
func ptySize(size *process.PTY_Size) *process.PTY_Size {
	if size == nil || size.GetRows() == 0 || size.GetCols() == 0 {
		return &process.PTY_Size{Rows: 24, Cols: 80}
	}
	return size
}
