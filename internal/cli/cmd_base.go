//go:build !msblean

package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/minisandbox/msb/internal/rootfs"
)

type baseBuildFlags struct {
	spec     rootfs.DebianSpec
	packages []string
	name     string
}

func newCacheBaseCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "base",
		Short: "Build and list Debian bases: root filesystems made by mmdebstrap from Debian's packages",
		Example: `  msb cache base build --suite bookworm --packages python3,git --name py
  msb cache base ls
  msb run --base debian/py -- python3 --version`,
	}
	cmd.AddCommand(newCacheBaseBuildCmd(g), newCacheBaseLsCmd(g))
	return cmd
}

func newCacheBaseBuildCmd(g *globals) *cobra.Command {
	var f baseBuildFlags
	cmd := &cobra.Command{
		Use:   "build --suite SUITE [--variant minbase|essential] [--packages a,b] [--date YYYYMMDDTHHMMSSZ] [--mirror URL] [--name NAME]",
		Short: "Build a Debian base with mmdebstrap into the cache (ref base/debian/<suite>/<key>)",
		Long: `Build a Debian base with mmdebstrap into the cache.

mmdebstrap runs in its root mode as root and in its unshare mode otherwise (a
user namespace over the caller's subordinate ids); its tar becomes one store
layer, files deduplicated against the whole cache. The key hashes the suite,
variant, sorted packages, date and mirror: the same inputs find the base
already built. With --date the packages come from <mirror>/<date>/ (the
mirror defaulting to snapshot.debian.org's archive). Run on a base with
msb run --base debian/<suite>/<key> (or debian/<name>); build environments on
it with msb cache build --base debian/<suite>/<key>.`,
		Example: `  msb cache base build --suite bookworm --variant essential --packages hello
  msb cache base build --suite bookworm --packages python3 --date 20240601T000000Z --name py-20240601`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runBaseBuild(cmd.Context(), g, &f)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.spec.Suite, "suite", "", "Debian suite (bookworm, trixie, ...)")
	fs.StringVar(&f.spec.Variant, "variant", rootfs.DefaultDebianVariant, "mmdebstrap variant: minbase (with apt) or essential")
	fs.StringSliceVar(&f.packages, "packages", nil, "more packages to install (comma-separated, repeatable)")
	fs.StringVar(&f.spec.Date, "date", "", "snapshot index date, YYYYMMDDTHHMMSSZ (as snapshot.debian.org names them)")
	fs.StringVar(&f.spec.Mirror, "mirror", "", "archive URL (default "+rootfs.DefaultDebianMirror+", with --date "+rootfs.DefaultSnapshotMirror+")")
	fs.StringVar(&f.name, "name", "", "also name the base debian/<name>")
	return cmd
}

func runBaseBuild(ctx context.Context, g *globals, f *baseBuildFlags) error {
	f.spec.Packages = f.packages
	c, err := g.openCache(false)
	if err != nil {
		return err
	}
	b, err := c.BuildDebianBase(ctx, f.spec, f.name, g.logger())
	if err != nil {
		return baseError(err)
	}
	if g.json {
		return printJSON(b)
	}
	how := fmt.Sprintf("built in %.1fs", b.Seconds)
	if b.Hit {
		how = "already in the cache"
	}
	fmt.Printf("debian base %s (%s; %s on disk, %s not shared)\n", b.Ref, how, fmtSize(b.DiskBytes), fmtSize(b.UniqueBytes))
	for _, r := range b.Refs[1:] {
		fmt.Printf("  ref %s\n", r)
	}
	return nil
}

// baseError makes an error about a base's inputs (malformed, a mirror that
// cannot serve them, no mmdebstrap) exit 2 with its one line.
func baseError(err error) error {
	if errors.Is(err, rootfs.ErrDebianSpec) || errors.Is(err, rootfs.ErrDebianMirror) || errors.Is(err, rootfs.ErrNoMmdebstrap) {
		return &exitError{code: exitUsage, msg: err.Error(), kind: "bad_image"}
	}
	return imageError(err)
}

func newCacheBaseLsCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "ls",
		Short:   "List the Debian bases: ref, suite, variant, packages, date, sizes",
		Example: "  msb cache base ls\n  msb cache base ls --json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.openCache(true)
			if err != nil {
				return err
			}
			bases, err := c.DebianBases(cmd.Context())
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(bases)
			}
			t := newTable("REF", "VARIANT", "PACKAGES", "DATE", "ON DISK", "UNIQUE")
			for _, b := range bases {
				t.row(refCell(b.Refs), b.Spec.Variant, or(strings.Join(b.Spec.Packages, ","), "-"), or(b.Spec.Date, "-"),
					fmtSize(b.DiskBytes), fmtSize(b.UniqueBytes))
			}
			return t.flush()
		},
	}
}
