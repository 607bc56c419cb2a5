package cli

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/minisandbox/msb/internal/client"
	"github.com/minisandbox/msb/internal/socketdir"
)

// daemonFlags say which daemon the client verbs (sandbox, exec, session,
// cp) talk to.
type daemonFlags struct {
	addr      string
	tokenFile string
}

func (f *daemonFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.addr, "daemon", "", "msb serve's address: unix:///path.sock or http://host:port (env MSB_SOCKET; default the daemon's default socket)")
	fs.StringVar(&f.tokenFile, "token-file", "", "the daemon's token, for TCP (env MSB_TOKEN)")
}

// client connects to the daemon.
func (f *daemonFlags) client(g *globals) (*client.Client, error) {
	addr := first(f.addr, g.env.Socket)
	if addr == "" {
		addr = "unix://" + socketdir.Default(g.env.UID, g.env.RuntimeDir)
	}
	token := g.env.Token
	if f.tokenFile != "" {
		b, err := os.ReadFile(f.tokenFile)
		if err != nil {
			return nil, fmt.Errorf("%w: --token-file: %w", errNoInput, err)
		}
		token, _, _ = strings.Cut(strings.TrimSpace(string(b)), "\n")
	}
	return client.New(addr, token)
}
