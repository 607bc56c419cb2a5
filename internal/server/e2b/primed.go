package e2b

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/engine"
	"github.com/minisandbox/msb/internal/sandbox/wire"
)

// A primed shell is the login shell of a sandbox's next commands.run,
// started ahead: the engine's fresh bash that has run the login prelude
// (loginPrelude: cwd, envs, /etc/profile and the user's profile) and
// waits, reading a FIFO, for the command it then runs with eval, on line
// 1, $BASH_EXECUTION_STRING set to it, SECONDS from 0. A command of the
// same shape (the same prelude: cwd and envs, run as the same user; no
// stdin, no terminal) that comes next takes it instead of waiting for a
// shell to start and read the profiles; the daemon writes the command
// into the FIFO, which it made in the sandbox's wire.SessionDir (its own
// /dev, in no snapshot) and holds open. The shell is then that process:
// its output, its end, and signals (its context) are the process's.
//
// A shell primed for a user (users.go) is switched to that user as that
// user's unprimed command is (asUser: setpriv with its groups, HOME, USER,
// LOGNAME) before it reads the profiles. wire.SessionDir is the sandbox
// user's alone, so the sandbox's shell opens the FIFO on primedFD before
// it switches; the user's shell reads the command from that descriptor
// and closes it before the command runs, so that the command sees the
// descriptors an unprimed one sees.
//
// A sandbox has at most one, made when a command that could have taken
// one ends and nothing else runs in it or changes it (no other process
// running, no file operation in flight): so a primed shell read the
// profiles after everything the front end did in the sandbox. Whatever
// might change what a login shell would see discards it: any process
// starting (a command of another shape, stdin, a pty), a file operation
// (write, upload, mkdir, move, remove), pause, kill. A sandbox that never
// runs a command has none.
//
// What a primed shell cannot promise: its profiles ran before the command
// came, so a change to them made outside the E2B API (the native API on
// the same sandbox) while it waited is not seen, and a profile's own side
// effects (a line appended to a log at each login) happen once more for
// the shell that waits.

// maxPrimedCommand is the longest command handed to a primed shell: with
// the NUL that ends it, one write a pipe takes whole (PIPE_BUF), so a
// hand-over never half happens. Longer ones start a shell of their own.
const maxPrimedCommand = 4095

// primed is one primed shell.
type primed struct {
	shape   string             // the shape of the commands it serves (proc.shape)
	key     string             // the engine's name for its command (ExecStreamKeyed), its taker's then
	prelude string             // the login prelude it ran
	user    *sysUser           // who it runs as; nil: the sandbox's user
	sid     string             // the engine's sandbox it runs in
	cancel  context.CancelFunc // stops it: SIGINT, then SIGKILL
	name    string             // the FIFO's name in dir
	made    chan struct{}      // closed once make has made the FIFO, or failed or given up

	mu        sync.Mutex                  // guards the fields below
	dir       *os.File                    // wire.SessionDir in the sandbox (O_PATH); nil until made
	fifo      int                         // the daemon's read-write end of the FIFO: the shell's open never blocks
	early     []earlyOutput               // output before a process took it (the profiles')
	size      int                         // bytes in early
	taker     *proc                       // the process it runs; nil while it waits
	out       func(stderr bool, b []byte) // the taker's output (proc.emitter)
	stopTaker context.CancelFunc          // ends the taker's run
	stopped   bool                        // close was called: no process may take it
	ended     bool
}

// primedFD is the descriptor on which a user's primed shell reads the
// FIFO, opened by the sandbox's shell before it switches to the user.
const primedFD = "9"

// primedScript is the primed shell's bash source: prelude, then the
// command read from fifo (a path in the sandbox) up to its NUL, run by
// eval on line 1; as u (asUser) when u is not nil, reading the FIFO on
// primedFD, which it closes with `command exec` (the redirections of
// `builtin exec` are undone after it) before the command runs.
func primedScript(prelude, fifo string, u *sysUser) string {
	const read, run = "IFS= builtin read -r -d '' BASH_EXECUTION_STRING <", `SECONDS=0; builtin eval "$BASH_EXECUTION_STRING"`
	if u == nil {
		return prelude + read + shellWord(fifo) + " || builtin exit 1; " + run
	}
	script := prelude + read + "&" + primedFD + " || builtin exit 1; command exec " + primedFD + "<&-; " + run
	return "exec " + primedFD + "<" + shellWord(fifo) + "; " + asUser(u, script)
}

// errPrimedStopped: a primed shell stopped before its FIFO was made.
var errPrimedStopped = errors.New("stopped before it was made")

// make makes p's FIFO in sb; the shell is not started (runPrimed). A p
// stopped meanwhile is not made; one not made has ended: no process
// takes it.
func (p *primed) make(sb *engine.Sandbox) (err error) {
	p.mu.Lock()
	defer func() {
		if err != nil {
			p.cleanup()
			p.ended = true
		}
		p.mu.Unlock()
		close(p.made)
	}()
	if p.stopped {
		return errPrimedStopped
	}
	root, err := os.OpenFile(fmt.Sprintf("/proc/%d/root", sb.InitPid()), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening the sandbox's root: %w", err)
	}
	defer root.Close()
	fd, err := unix.Openat2(int(root.Fd()), wire.SessionDir, &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS})
	if err != nil {
		return fmt.Errorf("opening %s in the sandbox: %w", wire.SessionDir, err)
	}
	p.dir = os.NewFile(uintptr(fd), wire.SessionDir)
	return p.makeFIFO()
}

// makeFIFO makes the FIFO, owned by the sandbox user (who owns its
// directory), and opens the daemon's end.
func (p *primed) makeFIFO() error {
	dir := int(p.dir.Fd())
	var st unix.Stat_t
	if err := unix.Fstat(dir, &st); err != nil {
		return fmt.Errorf("reading the owner of %s: %w", wire.SessionDir, err)
	}
	if err := unix.Mknodat(dir, p.name, unix.S_IFIFO|0o600, 0); err != nil {
		return fmt.Errorf("making the FIFO %s: %w", p.path(), err)
	}
	if int(st.Uid) != os.Geteuid() || int(st.Gid) != os.Getegid() {
		if err := unix.Fchownat(dir, p.name, int(st.Uid), int(st.Gid), unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fmt.Errorf("handing the FIFO %s to the sandbox user: %w", p.path(), err)
		}
	}
	fd, err := unix.Openat(dir, p.name, unix.O_RDWR|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return fmt.Errorf("opening the FIFO %s: %w", p.path(), err)
	}
	p.fifo = fd
	return nil
}

// path is the FIFO's path in the sandbox.
func (p *primed) path() string { return path.Join(wire.SessionDir, p.name) }

// cleanup closes the daemon's end of the FIFO and removes it. The caller
// holds p.mu.
func (p *primed) cleanup() {
	if p.fifo >= 0 {
		unix.Close(p.fifo)
		p.fifo = -1
	}
	if p.dir != nil {
		unix.Unlinkat(int(p.dir.Fd()), p.name, 0) // gone with a closed sandbox
		p.dir.Close()
		p.dir = nil
	}
}

// close stops the shell; runPrimed then cleans up after it.
func (p *primed) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stop()
}

// stop is close with p.mu held. It removes the FIFO's name at once, not
// when runPrimed cleans up after the shell's end (a kill's grace later, or
// more on a loaded machine): the sandbox shows no primed shell once the
// next one replaced it. A shell that has not opened it yet then exits.
func (p *primed) stop() {
	p.stopped = true
	if p.dir != nil {
		unix.Unlinkat(int(p.dir.Fd()), p.name, 0)
	}
	p.cancel()
}

// earlyOutput is a read of a primed shell's output before a process took it.
type earlyOutput struct {
	stderr bool
	data   []byte
}

// emit passes the shell's output to the process that took it, or keeps it
// for that process; a shell whose profiles print more than maxLog before
// a process takes it is stopped.
func (p *primed) emit(stderr bool, b []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.taker != nil {
		p.out(stderr, b)
		return
	}
	p.early = append(p.early, earlyOutput{stderr, bytes.Clone(b)})
	if p.size += len(b); p.size > maxLog {
		p.stop()
	}
}

// hand gives pr's command to the shell, which from then on is pr; false
// if the shell has ended or the command could not be written (the caller
// then stops it and runs pr in a shell of its own).
func (p *primed) hand(pr *proc) bool {
	<-p.made
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ended || p.stopped {
		return false
	}
	cmd := pr.config.GetArgs()[2] + "\x00"
	if n, err := unix.Write(p.fifo, []byte(cmd)); err != nil || n != len(cmd) {
		return false
	}
	p.taker, p.out = pr, pr.emitter(0) // a new process's first run
	pr.mu.Lock()
	p.stopTaker = pr.cancel // its run's, not a resumed one's
	pr.key = p.key
	pr.mu.Unlock()
	for _, o := range p.early {
		p.out(o.stderr, o.data)
	}
	p.early, p.size = nil, 0
	return true
}

// prime gives b a primed shell of the shape of done, a process of its
// sandbox sb that has just ended without error, if nothing else runs in
// the sandbox or changes it (box.canPrime). It is called before done's
// end event, so that a next command, which comes after it, finds the
// shell; the work of making it is start's, which the caller calls after
// the end event (nil: none to make). A command that takes the shell
// meanwhile waits for its FIFO (hand).
func (f *Front) prime(b *box, sb *engine.Sandbox, done *proc) (start func()) {
	shape := done.shape()
	if shape == "" {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.canPrime(sb.ID(), done) {
		return nil
	}
	if b.primed != nil {
		if b.primed.shape == shape {
			return nil
		}
		b.primed.close()
		b.primed = nil
	}
	prelude, _ := loginPrelude(done.config) // shape says it has one
	ctx, cancel := context.WithCancel(context.Background())
	p := &primed{shape: shape, prelude: prelude, user: done.user, sid: sb.ID(), cancel: cancel, name: "e2b-login-" + newToken(), key: "e2b-" + newToken(),
		made: make(chan struct{}), fifo: -1}
	b.primed = p
	return func() {
		if err := p.make(sb); err != nil {
			cancel()
			b.mu.Lock()
			if b.primed == p {
				b.primed = nil
			}
			b.mu.Unlock()
			if !errors.Is(err, errPrimedStopped) {
				f.log.Debug("priming a login shell", "sandbox", b.id, "err", err)
			}
			return
		}
		go f.runPrimed(ctx, b, sb, p)
	}
}

// canPrime says whether b may get a primed shell in its engine sandbox
// sid now: b is running in sid, no file operation is in flight and no
// process but done runs. The caller holds b.mu.
func (b *box) canPrime(sid string, done *proc) bool {
	select {
	case <-b.closed:
		return false
	default:
	}
	if b.paused != "" || b.sid != sid || b.busy > 0 {
		return false
	}
	live := b.live.Load()
	done.mu.Lock()
	if !done.ended {
		live--
	}
	done.mu.Unlock()
	return live == 0
}

// runPrimed runs the primed shell p in sb until it ends: as the process
// that took it (finish), or untaken, stopped or ended by itself (a
// profile that exits), when it is forgotten.
func (f *Front) runPrimed(ctx context.Context, b *box, sb *engine.Sandbox, p *primed) {
	defer p.cancel()
	res, err := sb.ExecStreamKeyed(ctx, p.key, api.ExecRequest{Command: primedScript(p.prelude, p.path(), p.user), SeparateStderr: true}, p.emit)
	p.mu.Lock()
	p.ended = true
	taker := p.taker
	p.cleanup()
	p.mu.Unlock()
	if taker != nil {
		f.finish(ctx, b, sb, taker, 0, res, err)
		p.stopTaker()
		return
	}
	b.mu.Lock()
	if b.primed == p {
		b.primed = nil
	}
	b.mu.Unlock()
	if err != nil && !errors.Is(err, context.Canceled) {
		f.log.Debug("a primed login shell ended", "sandbox", b.id, "err", err)
	}
}

// takePrimed takes b's primed shell away: returned if it serves commands
// of shape in sid, else stopped. Called with b.mu held by whatever starts
// a process or changes the sandbox.
func (b *box) takePrimed(shape, sid string) *primed {
	p := b.primed
	b.primed = nil
	if p == nil || shape != "" && p.shape == shape && p.sid == sid {
		return p
	}
	p.close()
	return nil
}

// changing marks a file operation on b in flight until the returned func
// is called: it discards b's primed shell, and none is made meanwhile.
func (b *box) changing() (done func()) {
	b.mu.Lock()
	b.busy++
	b.takePrimed("", "")
	b.mu.Unlock()
	return func() {
		b.mu.Lock()
		b.busy--
		b.mu.Unlock()
	}
}
