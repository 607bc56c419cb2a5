package cli

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/minisandbox/msb/internal/engine/host"
)

func newRunCmd(g *globals) *cobra.Command {
	var f specFlags
	var net netFlags
	cmd := &cobra.Command{
		Use:   "run [flags] -- COMMAND [ARG...]",
		Short: "Run one command in a new sandbox and pass its exit code through",
		Long: `Run one command in a new sandbox and pass its exit code through.

The command's stdin, stdout and stderr are pipes that msb relays to and from
its own: the sandbox never holds msb's files, and the command has no terminal
(use msb shell for one). Nothing else msb has open reaches the sandbox.`,
		Example: `  msb run -- bash -c 'id; hostname; ls /'
  msb run --image debian:bookworm -- cat /etc/os-release
  msb run --memory 256M --pids 64 --disk 2G --rw "$PWD" -w "$PWD" -- make test
  msb run --allow pypi.org:443 --allow files.pythonhosted.org:443 -- pip download requests`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runRun(cmd.Context(), g, &f, &net, args)
		},
	}
	f.register(cmd.Flags())
	cmd.Flags().StringVar(&f.image, "image", "", "run on an imported image (a reference, image/<ref> or sha256:<digest>) instead of the host base")
	cmd.Flags().StringVar(&f.image, "base", "", "run on a Debian base msb built (debian/<suite>/<key> or debian/<name>) or a snapshot (snapshot/<name>); the same as --image")
	net.register(cmd.Flags())
	cmd.Flags().SetInterspersed(false)
	return cmd
}

// netFlags are msb run's network rules.
type netFlags struct{ allow, deny []string }

func (n *netFlags) register(fs *pflag.FlagSet) {
	fs.StringArrayVar(&n.allow, "allow", nil, "a destination the sandbox may reach: an IPv4 address, CIDR or host name, with an optional :port; "+
		"127.0.0.1:PORT is the host's loopback, at 10.0.2.2 in the sandbox (repeatable; implies --network filtered; without --deny, nothing else is reachable)")
	fs.StringArrayVar(&n.deny, "deny", nil, "a destination the sandbox may not reach unless --allow names it, as --allow (repeatable; implies --network filtered; the rest is reachable)")
}

// apply puts the rules into spec: a filtered network whose policy, when
// only --allow is given, denies everything else.
func (n *netFlags) apply(spec *host.SandboxConfig) {
	if len(n.allow) == 0 && len(n.deny) == 0 {
		return
	}
	if spec.Network == host.NetworkNone {
		spec.Network = host.NetworkFiltered
	}
	deny := n.deny
	if len(deny) == 0 {
		deny = []string{"0.0.0.0/0"}
	}
	spec.NetPolicy = &host.NetPolicy{Allow: n.allow, Deny: deny}
}

func runRun(ctx context.Context, g *globals, f *specFlags, net *netFlags, argv []string) error {
	spec, err := f.spec()
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	net.apply(&spec)
	release, err := f.applyImage(ctx, g, &spec)
	if err != nil {
		return err
	}
	defer release()
	spec.Stdio = &host.Stdio{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}
	h, err := g.openHost()
	if err != nil {
		return err
	}
	defer h.Close()
	res, err := h.Run(ctx, spec, argv)
	if err != nil {
		return startFailure(err)
	}
	if f.keep {
		fmt.Fprintf(os.Stderr, "msb: upper dir kept at %s\n", res.UpperDir)
	}
	if res.Code != 0 {
		return &exitError{code: res.Code, msg: oomMessage(res.OOMKills)}
	}
	return nil
}

// startFailure is err, or when the sandbox could not start the command
// (a host.StartError: a shell's 127, not found, or 126, not
// executable), an exitError with that code, as a shell exits.
func startFailure(err error) error {
	var se *host.StartError
	if !errors.As(err, &se) {
		return err
	}
	switch se.Code {
	case exitNoCommand:
		return &exitError{code: se.Code, msg: se.Msg, kind: "command_not_found"}
	case exitNotExecutable:
		return &exitError{code: se.Code, msg: se.Msg, kind: "not_executable"}
	}
	return err
}

// oomMessage says why a command died with SIGKILL when the kernel's OOM
// killer killed something in the sandbox (engine.CommandResult.OOMKills;
// "" when it did not).
func oomMessage(kills int64) string {
	if kills == 0 {
		return ""
	}
	return fmt.Sprintf("the command was killed by the OOM killer: the sandbox reached its memory limit (%d OOM kills; raise it with --memory)", kills)
}
