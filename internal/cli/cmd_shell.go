package cli

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/minisandbox/msb/internal/engine/host"
)

func newShellCmd(g *globals) *cobra.Command {
	var f specFlags
	cmd := &cobra.Command{
		Use:   "shell [flags] [-- COMMAND [ARG...]]",
		Short: "Open an interactive shell (a real tty) in a new sandbox; without a terminal, run the shell on plain stdin",
		Example: `  msb shell
  msb shell --rw "$PWD" -w "$PWD"
  echo 'id; ls /' | msb shell`,
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
	spec.Stdio = &host.Stdio{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}
	h, err := g.openHost()
	if err != nil {
		return err
	}
	defer h.Close() // after sb.Close: it waits for the sandbox's cleanup
	sb, err := h.Start(ctx, spec)
	if err != nil {
		return err
	}
	defer sb.Close()
	fd := int(os.Stdin.Fd())
	var code int
	if !term.IsTerminal(fd) {
		// No terminal to put in raw mode: the shell reads commands from
		// stdin like `bash -s`, as msb run would run it.
		if len(argv) == 0 {
			argv = []string{"/bin/bash"}
		}
		code, err = sb.Run(ctx, argv)
	} else {
		code, err = ttyShell(ctx, sb, fd, argv)
	}
	if err != nil {
		return startFailure(err)
	}
	if code != 0 {
		return &exitError{code: code}
	}
	return nil
}

// ttyShell relays the terminal, in raw mode, to a pty in the sandbox,
// following window size changes.
func ttyShell(ctx context.Context, sb *host.OneShot, fd int, argv []string) (int, error) {
	cols, rows, err := term.GetSize(fd)
	if err != nil {
		cols, rows = 0, 0
	}
	old, err := term.MakeRaw(fd)
	if err != nil {
		return 0, fmt.Errorf("putting the terminal in raw mode: %w", err)
	}
	defer term.Restore(fd, old)
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	defer func() { signal.Stop(winch); close(winch) }()
	go func() {
		for range winch {
			if c, r, err := term.GetSize(fd); err == nil {
				sb.Resize(ctx, uint16(r), uint16(c))
			}
		}
	}()
	return sb.Shell(ctx, argv, uint16(rows), uint16(cols))
}
