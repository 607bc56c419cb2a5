package cli

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/minisandbox/msb/internal/sandbox"
	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"
)

func newShellCmd(g *globals) *cobra.Command {
	var f specFlags
	cmd := &cobra.Command{
		Use:   "shell [flags] [-- COMMAND [ARG...]]",
		Short: "Open an interactive shell (a real tty) in a new sandbox",
		Example: `  msb shell
  msb shell --rw "$PWD" -w "$PWD"`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runShell(cmd.Context(), g, &f, args)
		},
	}
	f.register(cmd.Flags())
	return cmd
}

func runShell(ctx context.Context, g *globals, f *specFlags, argv []string) error {
	spec, err := f.spec()
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	spec.Stdio = &sandbox.Stdio{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}
	rt, err := g.runtime()
	if err != nil {
		return err
	}
	sb, err := rt.Create(ctx, spec)
	if err != nil {
		return err
	}
	defer sb.Close()
	fd := int(os.Stdin.Fd())
	ws, wsErr := unix.IoctlGetWinsize(fd, unix.TIOCGWINSZ)
	if old, err := unix.IoctlGetTermios(fd, unix.TCGETS); err == nil {
		raw := *old
		raw.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
		raw.Oflag &^= unix.OPOST
		raw.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
		raw.Cflag &^= unix.CSIZE | unix.PARENB
		raw.Cflag |= unix.CS8
		raw.Cc[unix.VMIN], raw.Cc[unix.VTIME] = 1, 0
		unix.IoctlSetTermios(fd, unix.TCSETS, &raw)
		defer unix.IoctlSetTermios(fd, unix.TCSETS, old)
	}
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	defer signal.Stop(winch)
	go func() {
		for range winch {
			if w, err := unix.IoctlGetWinsize(fd, unix.TIOCGWINSZ); err == nil {
				sb.Resize(ctx, w.Row, w.Col)
			}
		}
	}()
	var rows, cols uint16
	if wsErr == nil {
		rows, cols = ws.Row, ws.Col
	}
	code, err := sb.Shell(ctx, argv, rows, cols)
	if err != nil {
		return err
	}
	if code != 0 {
		return &exitError{code: code}
	}
	return nil
}
