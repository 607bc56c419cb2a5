package task

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/minisandbox/msb/internal/envcache"
	"github.com/minisandbox/msb/internal/envcache/regproxy"
	"github.com/minisandbox/msb/internal/gitcmd"
	"github.com/minisandbox/msb/internal/sandbox"
	"github.com/minisandbox/msb/internal/session"
	"github.com/minisandbox/msb/internal/spec"
	"github.com/minisandbox/msb/internal/store"
)

// ApplyCommands are tried in order to apply a patch, as the harness does
// (its GIT_APPLY_CMDS); the first that succeeds is recorded.
var ApplyCommands = []string{
	"git apply --verbose",
	"git apply --verbose --3way",
	"git apply --verbose --reject",
	"patch --batch --forward --fuzz=5 -p1 -i",
}

// AlreadyApplied is the apply method recorded when every command failed but
// the patch reverses cleanly: it was applied already (the harness's check).
const AlreadyApplied = "already applied (git apply --check --reverse)"

// Paths inside a task sandbox, as the harness names them.
const (
	PatchPath  = "/tmp/patch.diff"
	ScriptPath = "/eval.sh"
	bugPath    = "/tmp/msb-bug.patch"
)

// Errors of task sandboxes; test with errors.Is.
var (
	// ErrPatchApply: no apply command applied the patch. The message holds
	// each command's output.
	ErrPatchApply = errors.New("patch did not apply")
	// ErrStartState: the task's starting state could not be made (a
	// SWE-smith bug patch that does not apply to its base commit).
	ErrStartState = errors.New("cannot put the task in its starting state")
	// ErrDiff: the agent's patch could not be read.
	ErrDiff = errors.New("cannot read the patch")
)

// Options shape a task sandbox.
type Options struct {
	Limits sandbox.Limits
	// MaxOutput caps each output stream of a command (0: the sandbox
	// package's default).
	MaxOutput int
	// Network is sandbox.NetworkNone (default), sandbox.NetworkHost or
	// sandbox.NetworkFiltered.
	Network string
	// NetPolicy is what a filtered sandbox may reach (nil: all but the
	// host's loopback).
	NetPolicy *sandbox.NetPolicy
	// Hostname is the sandbox's host name (empty: the sandbox's default).
	Hostname string
	// Progress receives the cache's build events.
	Progress envcache.Progress
	// Env is added to the environment's variables (NAME=value; the
	// spec's, exported by the eval script, still win).
	Env []string
	// AsRoot runs the sandbox's commands as root whatever user its image
	// names, with git trusting the repository whoever owns it (asRootEnv):
	// evaluation does, as SWE-bench's harness applies patches as root and
	// its images run the eval script as root.
	AsRoot bool
	// Session, when set, names a session the sandbox's create opens
	// (sandbox.Config.Session).
	Session string
}

// asRootEnv lets git work, as root, in a repository that the image's user
// owns (git refuses a repository another user owns: "dubious ownership"):
// safe.directory from the environment, the command scope git trusts.
var asRootEnv = []string{"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=safe.directory", "GIT_CONFIG_VALUE_0=*"}

// withoutEntry is env without the entry kv ("": env itself), in a new
// slice: root run in place of an image's user leaves that user's HOME
// behind and gets its own, /root, as docker exec gives root.
func withoutEntry(env []string, kv string) []string {
	if kv == "" {
		return env
	}
	return slices.DeleteFunc(slices.Clone(env), func(e string) bool { return e == kv })
}

// Sandbox is a task's sandbox in the task's starting state. It is a
// sandbox.Sandbox (exec, sessions, files) plus the task operations.
type Sandbox struct {
	*sandbox.Sandbox
	Task *Task
	// EnvTime is how long the layers took to look up (or build);
	// ReadyTime how long the sandbox took to start in its starting state.
	EnvTime, ReadyTime time.Duration
	prep               *envcache.Prepared
	stopProxy          func() // the registry proxy of a sandbox with the host's network
}

// Open prepares the task's layers and starts its sandbox in the starting
// state. Errors: envcache.ErrEnvBuildFailed (the environment does not
// build), envcache.ErrRepo (the repository or commit cannot be had; the
// message says how to name its source), ErrStartState, and the sandbox
// package's.
func Open(ctx context.Context, env Env, t *Task, o Options) (*Sandbox, error) {
	start := time.Now()
	prep, err := env.Cache.Prepare(ctx, t.Instance, t.Spec, o.Progress)
	if err != nil {
		return nil, explainPrepare(t, err)
	}
	s := &Sandbox{Task: t, prep: prep, EnvTime: time.Since(start)}
	start = time.Now()
	conf := prep.SandboxConfig()
	conf.Limits, conf.MaxOutput, conf.Network, conf.Hostname = o.Limits, o.MaxOutput, o.Network, o.Hostname
	conf.NetPolicy = o.NetPolicy
	conf.Env = append(slices.Clip(conf.Env), o.Env...)
	if conf, err = s.ownRegistryProxy(env, conf); err != nil {
		prep.Release()
		return nil, err
	}
	if o.AsRoot && conf.User != (sandbox.User{}) {
		conf.User, conf.Env = sandbox.User{}, append(withoutEntry(conf.Env, prep.UserHome), asRootEnv...)
	}
	if o.Session != "" {
		conf.Session = &sandbox.SessionStart{Name: o.Session}
	}
	if s.Sandbox, err = env.Runtime.Create(ctx, conf); err != nil {
		s.stopRegistryProxy()
		prep.Release()
		return nil, fmt.Errorf("creating the sandbox of %s: %w", t.ID(), err)
	}
	if t.Instance.BugIsGoldPatch() {
		if err := s.commitBug(ctx); err != nil {
			s.Close()
			return nil, err
		}
	}
	s.ReadyTime = time.Since(start)
	return s, nil
}

// explainPrepare adds what to do to a cache error.
func explainPrepare(t *Task, err error) error {
	if errors.Is(err, envcache.ErrRepo) {
		return fmt.Errorf("preparing %s: %w (tell msb where %s is: --repo-source %s=PATH_OR_URL, or repo_sources in the config file)",
			t.ID(), err, t.Instance.Repo, t.Instance.Repo)
	}
	return fmt.Errorf("preparing %s: %w", t.ID(), err)
}

// LayersReused reports whether the task's layers were all in the cache
// already (nothing was built to open it).
func (s *Sandbox) LayersReused() bool { return s.prep.Reused }

// Close closes the sandbox and releases its layers.
func (s *Sandbox) Close() error {
	err := s.Sandbox.Close()
	s.stopRegistryProxy()
	return errors.Join(err, s.prep.Release())
}

// ownRegistryProxy gives conf, when its network is the host's, a registry
// proxy that s owns (stopped on Close): the dependency tools fetch through
// it, as the build's did (cargo must: envcache.Cache.RegistryProxy). Its
// entries replace those of a proxy conf's environment names already: a
// fork's config is its parent's, whose proxy stops when the parent closes.
func (s *Sandbox) ownRegistryProxy(env Env, conf sandbox.Config) (sandbox.Config, error) {
	if conf.Network != sandbox.NetworkHost {
		return conf, nil
	}
	proxyEnv, stop, err := env.Cache.RegistryProxy()
	if err != nil {
		return conf, fmt.Errorf("the network of %s: %w", s.Task.ID(), err)
	}
	s.stopProxy = stop
	conf.Env = append(withoutNames(envcache.OnlineEnv(conf.Env), proxyEnv), proxyEnv...)
	return conf, nil
}

// WithoutRegistryProxy is env, a session's recorded in one sandbox to be
// reopened in another (a fork, a rollback), without the registry proxy's
// entries: the session takes those of its new sandbox's own proxy
// (ownRegistryProxy) from that sandbox's environment.
func WithoutRegistryProxy(env []string) []string {
	return withoutNames(slices.Clone(env), regproxy.Env("addr"))
}

// withoutNames is env without the variables that entries name (NAME=value).
func withoutNames(env, entries []string) []string {
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i], _, _ = strings.Cut(e, "=")
	}
	return slices.DeleteFunc(env, func(e string) bool {
		name, _, _ := strings.Cut(e, "=")
		return slices.Contains(names, name)
	})
}

func (s *Sandbox) stopRegistryProxy() {
	if s.stopProxy != nil {
		s.stopProxy()
	}
}

// RepoDir is where the task's repository is: envcache.Testbed, or for an
// image instance where its image keeps it.
func (s *Sandbox) RepoDir() string {
	if s.prep.Workdir == "" {
		return envcache.Testbed
	}
	return s.prep.Workdir
}

// run runs a shell command in the repository in a fresh bash.
func (s *Sandbox) run(ctx context.Context, cmd string, timeout time.Duration) (session.Result, error) {
	return s.Exec(ctx, session.ExecRequest{Command: "cd " + spec.ShellQuote(s.RepoDir()) + " && " + cmd, Timeout: timeout})
}

// commitBug puts a SWE-smith instance in its starting state: the base
// commit with the bug-introducing patch applied and committed, so that a
// model patch (a diff against that state) applies on top and HEAD is what
// test files are reset to.
func (s *Sandbox) commitBug(ctx context.Context) error {
	if err := s.WriteFile(ctx, bugPath, []byte(withNewline(s.Task.Instance.Patch)), 0o644); err != nil {
		return fmt.Errorf("%w: writing the bug patch: %w", ErrStartState, err)
	}
	res, err := s.run(ctx, "git apply "+bugPath+" 2>&1 && rm -f "+bugPath+
		" && git -c user.name=msb -c user.email=msb@localhost commit -qam 'SWE-smith bug' 2>&1", time.Minute)
	if err != nil {
		return fmt.Errorf("%w: applying the bug patch: %w", ErrStartState, err)
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("%w: the bug patch of %s does not apply to %s: %s", ErrStartState, s.Task.ID(), s.Task.Instance.BaseCommit, lastLines(res.Output, 5))
	}
	return nil
}

// gitChanged is what a patch command that wrote inside .git says.
const gitChanged = "msb: the patch writes inside .git, whose paths git apply refuses"

// keepGit wraps an apply command that is not git's own (GNU patch), which
// writes wherever the patch says, .git included: a patch's hook or config
// there would run, or steer git, in the rest of the evaluation. When .git
// (its listing: names, sizes, modes, times) is not the same afterwards, the
// command fails with gitChanged, as git apply fails on such a path.
func keepGit(cmd string) string {
	if strings.HasPrefix(cmd, "git ") {
		return cmd
	}
	const list = "ls -laR .git 2>&1 | cksum"
	return "before=$(" + list + "); " + cmd + "; rc=$?; " +
		"if [ \"$before\" != \"$(" + list + ")\" ]; then echo '" + gitChanged + "'; exit 1; fi; exit $rc"
}

// ApplyPatch applies patch with the first of ApplyCommands that works and
// returns it. Between attempts it resets the tree as the harness does
// (tracked files checked out, untracked files removed), so use it on a
// sandbox in its starting state. When no command works but the patch
// reverses cleanly, it is already applied (AlreadyApplied). Log, when not
// nil, receives each attempt. The error is ErrPatchApply with each
// command's output, or an infrastructure error.
func (s *Sandbox) ApplyPatch(ctx context.Context, patch string, log *RunLog) (string, error) {
	if err := s.WriteFile(ctx, PatchPath, []byte(withNewline(patch)), 0o644); err != nil {
		return "", fmt.Errorf("writing the patch into the sandbox: %w", err)
	}
	var tried []string
	for i, c := range ApplyCommands {
		if i > 0 {
			// A failed attempt (--reject notably) leaves a partial state.
			res, err := s.run(ctx, "git reset -q --hard && git clean -fdq", time.Minute)
			if err != nil {
				return "", fmt.Errorf("resetting the tree after %q: %w", ApplyCommands[i-1], err)
			}
			if res.ExitCode != 0 {
				return "", fmt.Errorf("resetting the tree after %q: exit %d: %s", ApplyCommands[i-1], res.ExitCode, lastLines(res.Output, 5))
			}
		}
		res, err := s.run(ctx, keepGit(c+" "+PatchPath+" 2>&1"), 5*time.Minute)
		if err != nil {
			return "", fmt.Errorf("applying the patch: %w", err)
		}
		if res.ExitCode == 0 {
			log.Printf(">>>>> Applied Patch (%s):\n%s", c, strings.TrimRight(res.Output, "\n"))
			return c, nil
		}
		log.Printf("Failed to apply patch: %s: exit %d", c, res.ExitCode)
		tried = append(tried, fmt.Sprintf("%s: exit %d: %s", c, res.ExitCode, lastLines(res.Output, 5)))
		if strings.Contains(res.Output, gitChanged) {
			return "", applyFailed(log, tried) // nothing more runs git on a .git the patch wrote
		}
	}
	res, err := s.run(ctx, "git apply --check --reverse "+PatchPath+" 2>&1", time.Minute)
	if err != nil {
		return "", fmt.Errorf("checking whether the patch is applied: %w", err)
	}
	if res.ExitCode == 0 {
		log.Printf(">>>>> Applied Patch: verified already applied")
		return AlreadyApplied, nil
	}
	return "", applyFailed(log, tried)
}

// applyFailed is ErrPatchApply with each attempt's output, logged.
func applyFailed(log *RunLog, tried []string) error {
	err := fmt.Errorf("%w:\n%s", ErrPatchApply, strings.Join(tried, "\n"))
	log.Printf(">>>>> Patch Apply Failed:\n%v", err)
	return err
}

// diffScript writes the agent's patch, of the repository at dir, to
// stdout. Git runs as gitcmd.Shell sets it up: on the repository's own
// .git (a .git file or core.worktree pointing elsewhere is an error, not
// another repository), with no system or global
// configuration (the agent may write ~/.gitconfig), no fsmonitor, no hooks,
// no attributes file, every filter driver the repository's config defines
// emptied (a clean filter would run on git add and could rewrite what the
// patch says); the diff without external diff or textconv, and --binary so
// that a "-diff" attribute (or a binary file) gives a patch git apply can
// apply, not "Binary files differ".
func diffScript(dir string) string {
	return gitcmd.Shell(dir) + diffCommands
}

// diffCommands are diffScript's after gitcmd.Shell's prelude.
const diffCommands = `set -- "$@" -c core.fileMode=false
f=$(mktemp) || exit 1
cp .git/index "$f" 2>/dev/null
GIT_INDEX_FILE="$f" git "$@" add -A && GIT_INDEX_FILE="$f" git "$@" diff --cached --no-ext-diff --no-textconv --binary HEAD
rc=$?
rm -f "$f"
exit $rc`

// Diff returns the agent's patch: every change in RepoDir against HEAD
// (the base commit; for SWE-smith the committed bug), untracked files
// included and ignored files left out, as `git add -A && git diff --cached`
// gives it. The sandbox's own git index is not touched, and the bytes are
// the file's, not a terminal's rendering of them.
//
// The agent owns the repository's configuration, so git runs as
// diffScript says: no repository setting may run a program, redirect the
// repository or hide a change from the patch.
func (s *Sandbox) Diff(ctx context.Context) (string, error) {
	const out = "/tmp/msb-agent.patch"
	script := "{\n" + diffScript(s.RepoDir()) + "\n} >" + out
	res, err := s.Exec(ctx, session.ExecRequest{Command: script, Timeout: 5 * time.Minute})
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrDiff, err)
	}
	if res.TimedOut || res.ExitCode != 0 {
		return "", fmt.Errorf("%w: git exited %d (timed out: %v): %s", ErrDiff, res.ExitCode, res.TimedOut, lastLines(res.Output, 5))
	}
	b, err := s.ReadFile(ctx, out, maxPatch)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrDiff, err)
	}
	if _, err := s.Exec(ctx, session.ExecRequest{Command: "rm -f " + out, Timeout: time.Minute}); err != nil {
		return "", fmt.Errorf("%w: removing %s: %w", ErrDiff, out, err)
	}
	return string(b), nil
}

// maxPatch bounds a patch read from a sandbox.
const maxPatch = 64 << 20

// TestFiles are the files the task's test_patch changes that existed
// before it; evaluation resets them to HEAD.
func (t *Task) TestFiles() []string { return spec.TestFiles(t.Instance.TestPatch) }

func withNewline(s string) string {
	if s != "" && !strings.HasSuffix(s, "\n") {
		return s + "\n"
	}
	return s
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Start starts a task sandbox of t from conf, a config over layers that
// lease keeps (a fork of a task sandbox, or its rollback, with a snapshot
// layer on top): Close closes it and releases lease. With the host's
// network it has a registry proxy of its own (ownRegistryProxy), so it
// outlives the sandbox it was forked from. On an error lease is still the
// caller's to release.
func Start(ctx context.Context, env Env, t *Task, conf sandbox.Config, lease *store.Lease) (*Sandbox, error) {
	return start(env, t, conf, func(conf sandbox.Config) (*sandbox.Sandbox, *store.Lease, error) {
		sb, err := env.Runtime.Create(ctx, conf)
		return sb, lease, err
	})
}

// StartDeferred is Start with the layers to come (sandbox.Runtime.
// CreateDeferred): later gives them, and the lease that keeps them,
// while the sandbox's init starts. On an error the lease later gave is
// released.
func StartDeferred(ctx context.Context, env Env, t *Task, conf sandbox.Config, later func(context.Context) (sandbox.Deferred, *store.Lease, error)) (*Sandbox, error) {
	return start(env, t, conf, func(conf sandbox.Config) (*sandbox.Sandbox, *store.Lease, error) {
		var lease *store.Lease
		sb, err := env.Runtime.CreateDeferred(ctx, conf, func(ctx context.Context) (sandbox.Deferred, error) {
			d, l, err := later(ctx)
			lease = l
			return d, err
		})
		if err != nil && lease != nil {
			lease.Release()
		}
		return sb, lease, err
	})
}

// start is Start, the sandbox made by create from the config with its
// registry proxy, which returns the lease of its layers too.
func start(env Env, t *Task, conf sandbox.Config, create func(sandbox.Config) (*sandbox.Sandbox, *store.Lease, error)) (*Sandbox, error) {
	s := &Sandbox{Task: t}
	conf, err := s.ownRegistryProxy(env, conf)
	if err != nil {
		return nil, err
	}
	sb, lease, err := create(conf)
	if err != nil {
		s.stopRegistryProxy()
		return nil, err
	}
	s.Sandbox = sb
	s.prep = &envcache.Prepared{Lease: lease, Workdir: s.Sandbox.Config().Workdir}
	return s, nil
}
