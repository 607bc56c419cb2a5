package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/minisandbox/msb/internal/api"
)

func newVersionCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print msb's version and the commit it was built from (as msb --version)",
		Example: "  msb version\n  msb --version\n  msb version --json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			v := buildVersion()
			if g.json {
				return printJSON(v.api())
			}
			fmt.Println("msb", v.String())
			return nil
		},
	}
}

// version is what the binary knows of its build (debug.ReadBuildInfo).
type version struct {
	module, revision, time, goVersion string
	modified                          bool
}

func buildVersion() version {
	v := version{module: "(devel)", goVersion: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	if bi.Main.Version != "" {
		v.module = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.revision = s.Value
		case "vcs.time":
			v.time = s.Value
		case "vcs.modified":
			v.modified = s.Value == "true"
		}
	}
	return v
}

// String is one line: "v1.2.3 (commit 0123456789ab, 2026-12-04T10:00:00Z, modified; go1.26)".
func (v version) String() string {
	s := v.module + " ("
	if v.revision != "" {
		s += "commit " + v.revision[:min(12, len(v.revision))]
		if v.time != "" {
			s += ", " + v.time
		}
		if v.modified {
			s += ", modified"
		}
		s += "; "
	}
	return s + v.goVersion + ")"
}

func (v version) api() api.Version {
	return api.Version{Version: v.module, Revision: v.revision, Time: v.time, Modified: v.modified, Go: v.goVersion}
}
