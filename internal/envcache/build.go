package envcache

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/minisandbox/msb/internal/sandbox"
	"github.com/minisandbox/msb/internal/session"
	"github.com/minisandbox/msb/internal/store"
	"golang.org/x/sys/unix"
)

// Kinds of build (BuildError.Kind), in log and marker names.
const (
	KindEnv     = "env"
	KindInstall = "install"
)

// sourceDateEpoch is the SOURCE_DATE_EPOCH of builds (2000-01-01): pip
// then compiles .pyc files checked by source hash, not by the build's
// times (Python 3.7+), so the same install gives the same bytes and the
// layers of many instances share them.
const sourceDateEpoch = "946684800"

// buildJob is one script run in a build sandbox whose upper dir becomes a
// layer: an environment (over the base) or an instance's install steps
// (over the base, the environment and the repository).
type buildJob struct {
	kind   string
	key    string
	envKey string // the instance's repo@version, for messages
	header string // the log's first line
	stack  []store.LayerID
	binds  []sandbox.Bind
	script string
	env    []string // more environment variables of the script
	base   baseInfo // what it builds on: its Env goes under the script's
	// indexDate: pip sees the index as of that day ("" today's).
	indexDate string
	// workdir of the script (Testbed for installs, / for environments).
	workdir string
	// hostNetwork: the script reaches the network itself (apt-get of a
	// Debian packages layer), not through the download cache.
	hostNetwork bool
	// registries: with hostNetwork, the dependency step's npm and go
	// reach their registries through msb's caching proxy (registries.go).
	registries bool
	// keep, when set, is given the build's upper dir before it is
	// committed (the dependency store takes what was fetched).
	keep func(upper string) error
}

// logPath is where the build log of a key goes.
func (c *Cache) logPath(kind, key string) string {
	return c.path("logs", kind+"-"+key+".log")
}

// build runs job's script in a build sandbox and returns the cleaned upper
// dir, to be committed by the caller, and a function that removes it. A
// failure is recorded (failed/<key>.json with the log) and returned as a
// *BuildError; a cancelled build is not recorded.
func (c *Cache) build(ctx context.Context, r *run, job buildJob) (string, func(), error) {
	if c.opts.Runtime == nil {
		return "", nil, errors.New("building an environment needs a sandbox runtime")
	}
	dir := c.path("build", job.kind+"-"+job.key)
	removeAll(dir)
	upper := filepath.Join(dir, "upper")
	if err := os.MkdirAll(upper, 0o755); err != nil {
		return "", nil, err
	}
	cleanup := func() { removeAll(dir) }
	logPath := c.logPath(job.kind, job.key)
	var log strings.Builder
	fmt.Fprintf(&log, "# %s, started %s\n", job.header, time.Now().UTC().Format(time.RFC3339))
	fail := func(reason string, err error) (string, func(), error) {
		cleanup()
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
			os.WriteFile(logPath, []byte(log.String()+"\n# interrupted: "+err.Error()+"\n"), 0o644)
			return "", nil, err
		}
		if err != nil {
			reason += ": " + err.Error()
		}
		c.failedBuilds.Add(1)
		fmt.Fprintf(&log, "\n# FAILED: %s\n", reason)
		os.WriteFile(logPath, []byte(log.String()), 0o644)
		be := &BuildError{Kind: job.kind, Key: job.key, EnvKey: job.envKey, Log: logPath, Tail: tail(log.String(), 20), Reason: firstLine(reason), At: time.Now().UTC()}
		if b, err := json.MarshalIndent(be, "", "  "); err == nil {
			writeAtomic(c.path("failed", job.key+".json"), b)
		}
		return "", nil, be
	}

	lease, err := c.store.Lease(ctx, job.stack...)
	if err != nil {
		return fail("leasing the layers to build on", err)
	}
	defer lease.Release()
	var layers []string
	for i := len(job.stack) - 1; i >= 0; i-- {
		layers = append(layers, c.store.TreePath(job.stack[i]))
	}
	net, err := c.buildNetwork(ctx, job.indexDate)
	if job.hostNetwork && err == nil {
		net.stop()
		net = buildNet{network: sandbox.NetworkHost, stop: func() {}}
		if job.registries {
			net, err = c.registryNetwork()
		}
	}
	if err != nil {
		return fail("starting the download cache", err)
	}
	defer net.stop()
	conf := sandbox.Config{
		Layers: layers, HostBase: job.base.host, UpperDir: upper, Network: net.network,
		Workdir: job.workdir, Binds: append(job.binds, net.binds...), Limits: c.opts.BuildLimits, MaxOutput: 4 << 20,
		Env: job.base.onBase(append([]string{"PIP_DISABLE_PIP_VERSION_CHECK=1", "PIP_NO_INPUT=1", "PIP_CACHE_DIR=/tmp/msb-pip-cache",
			"SOURCE_DATE_EPOCH=" + sourceDateEpoch}, append(job.env, net.env...)...)),
	}
	fmt.Fprintf(&log, "# network: %s; pip: %s\n# script:\n%s\n# output:\n", net.network, strings.Join(net.env, " "), job.script)

	var budget int64
	if b := c.opts.Budget; b != nil {
		budget = min(b.Limit(), 512<<20)
		if err := b.Acquire(ctx, budget); err != nil {
			return fail("waiting for I/O budget", err)
		}
	}
	phase := PhaseEnvBuild
	if job.kind == KindInstall {
		phase = PhaseInstall
	}
	var res session.Result
	err = r.phase(phase, func() error {
		sb, err := c.opts.Runtime.Create(ctx, conf)
		if err != nil {
			return fmt.Errorf("creating the build sandbox: %w", err)
		}
		if err := sb.WriteFile(ctx, "/tmp/msb-build.sh", []byte(job.script), 0o755); err != nil {
			sb.Close()
			return fmt.Errorf("writing the build script: %w", err)
		}
		res, err = sb.Exec(ctx, session.ExecRequest{Command: "bash /tmp/msb-build.sh", Timeout: c.opts.BuildTimeout})
		return errors.Join(err, sb.Close())
	})
	if c.opts.Budget != nil {
		c.opts.Budget.Release(budget)
	}
	log.WriteString(res.Output)
	if err != nil {
		return fail("running the build", err)
	}
	if res.TimedOut {
		return fail(fmt.Sprintf("timed out after %s", c.opts.BuildTimeout), nil)
	}
	if res.ExitCode != 0 {
		return fail(fmt.Sprintf("%s steps exited with status %d%s", job.kind, res.ExitCode, net.hint(res.Output)), nil)
	}
	mounts := []string{wheelMount, downloadsMount}
	for _, b := range conf.Binds {
		mounts = append(mounts, b.Target)
	}
	if err := cleanUpper(upper, job.kind == KindEnv, mounts); err != nil {
		return fail("cleaning the build's upper dir", err)
	}
	fmt.Fprintf(&log, "\n# build finished %s\n", time.Now().UTC().Format(time.RFC3339))
	os.WriteFile(logPath, []byte(log.String()), 0o644)
	return upper, cleanup, nil
}

// installMtime is the modification time of every file of an install
// layer: a day after the repository's (repoMtime), long before any edit in
// a task. Build tools then find what the install built newer than the
// pristine sources and older than a patched one (distutils compares whole
// seconds, so the time a layer happened to be written, seconds before a
// task, is not enough), and identical outputs stay identical layers.
var installMtime = repoMtime.Add(24 * time.Hour)

// goCacheMtime is the modification time of the files of Go's build cache
// (goCache) in an install layer: far in the future. go marks a cache
// entry it uses by setting the entry's mtime to now once it is an hour
// old, and trims entries unused for five days; at installMtime every go
// command in a fresh sandbox rewrote the mtime of each entry it read, and
// overlayfs copied each one up (972 of 1386 files, 2.7 s, in the harness's
// sandbox and again in the canary's). Entries newer than now are neither
// marked nor trimmed, and the layer stays the same for the same inputs.
var goCacheMtime = time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)

// commitBuild commits a build's upper dir under ref and notes it in the log.
// An install layer's files get installMtime (goCacheMtime in Go's build
// cache), recorded.
func (c *Cache) commitBuild(ctx context.Context, r *run, job buildJob, upper, ref string, parents []store.LayerID) (store.LayerID, error) {
	var id store.LayerID
	keep := job.kind == KindInstall
	err := r.phase(PhaseCommit, func() error {
		if keep {
			if err := setTimes(upper, installMtime); err != nil {
				return err
			}
			if err := setTimes(filepath.Join(upper, goCache), goCacheMtime); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
		var err error
		id, err = c.store.CommitDir(ctx, upper, store.CommitOptions{Parents: parents, Ref: ref, MapOwner: OwnerAsRoot(), KeepMtime: keep})
		return err
	})
	if err != nil {
		return id, fmt.Errorf("committing the %s layer %s: %w", job.kind, short(job.key), err)
	}
	if f, err := os.OpenFile(c.logPath(job.kind, job.key), os.O_APPEND|os.O_WRONLY, 0); err == nil {
		fmt.Fprintf(f, "# committed layer %s as %s\n", id, ref)
		f.Close()
	}
	return id, nil
}

// setTimes sets the access and modification times of everything under dir.
func setTimes(dir string, t time.Time) error {
	ts := []unix.Timespec{unix.NsecToTimespec(t.UnixNano()), unix.NsecToTimespec(t.UnixNano())}
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return unix.UtimesNanoAt(unix.AT_FDCWD, p, ts, unix.AT_SYMLINK_NOFOLLOW)
	})
}

// cleanUpper removes from a build's upper dir what must not be in a layer:
// /tmp, caches, the mount points the sandbox made (removed while empty, up
// to the top), and for an environment /testbed (the repository and what
// the install steps write there have layers of their own).
func cleanUpper(upper string, env bool, mounts []string) error {
	drop := []string{"tmp", "root/.cache"}
	if env {
		drop = append(drop, strings.TrimPrefix(Testbed, "/"))
	}
	for _, p := range drop {
		if err := removeAll(filepath.Join(upper, p)); err != nil {
			return err
		}
	}
	for _, m := range mounts {
		for p := filepath.Join(upper, m); p != upper && strings.HasPrefix(p, upper+"/"); p = filepath.Dir(p) {
			if os.Remove(p) != nil { // not empty, or gone
				break
			}
		}
	}
	return nil
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}
