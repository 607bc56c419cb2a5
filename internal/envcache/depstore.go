package envcache

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/minisandbox/msb/internal/atomicfile"
	"github.com/minisandbox/msb/internal/envcache/regproxy"
)

// The dependency store keeps what the dependency steps of non-Python
// install builds fetched with cargo and Maven, in the download cache
// under deps/ (DepsDir's layout), so that a later build without the
// network finds it there, as pip finds the files of earlier builds. Only
// the parts of each tool's cache that are immutable, or merge by adding
// files, are kept. npm, go, cargo and Maven fetch through the registry
// proxy, which keeps their files in the download cache itself (package
// regproxy); cargo's and Maven's are kept here too, as the tools keep
// them: an offline cargo reads the index cache only cargo writes, and
// the local repository has what Maven fetched from repositories other
// than Central.
const depStoreDir = "deps"

// depStoreParts are the dirs under DepsDir a build's fetched files are
// kept from: cargo's registry index and .crate files and Maven's local
// repository. (Go's module download cache was kept here before the
// registry proxy; what caches kept of it still serves, goStoreDir.)
var depStoreParts = []string{"cargo/registry/index", "cargo/registry/cache", "m2"}

// goStoreDir is where the dependency store kept Go's module download
// cache (a GOPROXY layout) before the registry proxy: a second module
// proxy of offline builds, for caches filled then.
var goStoreDir = downloadsMount + "/" + depStoreDir + "/go/pkg/mod/cache/download"

// seedScript is what an install build without the network runs before
// its steps: cargo's registry and Maven's repository from the store, and
// the npm tarballs the registry proxy kept, are copied into DepsDir
// (cargo, Maven and npm read them there offline: npm ci takes a tarball
// from its cache by the lockfile's integrity); go reads the download
// cache as its module proxy (offlineBuildEnv). When the store's cargo
// registry was fetched through the proxy (its dirs named after
// regproxy.CargoHost), cargo gets the proxy's config, as the online
// build did, to find it there.
func seedScript() string {
	var b strings.Builder
	seeds := [][2]string{
		{depStoreDir + "/cargo/registry", "cargo/registry"},
		{depStoreDir + "/m2", "m2"},
		{regproxy.NPMContentDir + "/content-v2", "npm/_cacache/content-v2"},
	}
	for _, s := range seeds {
		src := downloadsMount + "/" + s[0]
		fmt.Fprintf(&b, "if [ -d %[1]s ]; then mkdir -p %[2]s && cp -R %[1]s/. %[2]s/; fi\n", src, DepsDir+"/"+s[1])
	}
	fmt.Fprintf(&b, "if compgen -G '%s/cargo/registry/index/%s-*' >/dev/null; then cat > %s/cargo/config.toml <<'MSB_CARGO_CONFIG'\n%sMSB_CARGO_CONFIG\nfi\n",
		DepsDir, regproxy.CargoHost, DepsDir, regproxy.CargoConfig)
	return b.String()
}

// offlineBuildEnv are the offline switches of an install build without
// the network: offlineEnv, with Go's module proxy at the download cache
// (what the registry proxy kept, then the old dependency store).
func offlineBuildEnv() []string {
	env := make([]string, 0, len(offlineEnv))
	for _, e := range offlineEnv {
		if strings.HasPrefix(e, "GOPROXY=") {
			e = "GOPROXY=file://" + downloadsMount + "/" + regproxy.GoDir + ",file://" + goStoreDir + ",off"
		}
		env = append(env, e)
	}
	return env
}

// keepDeps copies the files of a build's upper dir under depStoreParts
// that the store lacks into it (a file already there is left alone: the
// same path holds the same bytes).
func (c *Cache) keepDeps(upper string) error {
	var errs []error
	for _, part := range depStoreParts {
		src := filepath.Join(upper, strings.TrimPrefix(DepsDir, "/"), part)
		dst := filepath.Join(c.opts.DownloadCache, depStoreDir, part)
		errs = append(errs, copyMissing(src, dst))
	}
	return errors.Join(errs...)
}

// copyMissing copies the regular files and directories of src that dst
// lacks, each file by a temporary name and a rename.
func copyMissing(src, dst string) error {
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case !d.Type().IsRegular():
			return nil
		}
		if _, err := os.Lstat(target); err == nil {
			return nil
		}
		return copyFile(p, target)
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil // the build fetched nothing of this tool
	}
	return err
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	return atomicfile.WriteFrom(dst, cacheWrite, func(f *os.File) error {
		_, err := io.Copy(f, in)
		return err
	})
}
