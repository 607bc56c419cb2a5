package sudo

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"unsafe"

	"github.com/minisandbox/msb/internal/sandbox/wire"
	"golang.org/x/sys/unix"
)

// securePath is the PATH commands get and are looked up in: Debian's
// sudoers secure_path, which E2B's templates keep.
const securePath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// keptEnv are the variables a reset environment keeps from the caller's,
// as sudo's env_reset does (besides those it sets itself).
var keptEnv = []string{"TERM", "COLORS", "DISPLAY", "HOSTNAME", "LS_COLORS", "PS1", "PS2", "XAUTHORITY",
	"XAUTHORIZATION", "LANG", "LANGUAGE", "LINGUAS", "TZ"}

// Main is sudo run as args (without the program's name); it returns the
// exit status: the command's, or 1 when sudo itself fails, as sudo's.
func Main(args []string) int {
	o, err := parse(args)
	if err == nil && o.done {
		return 0
	}
	var req Request
	if err == nil {
		req, err = o.request(os.Environ())
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "sudo: %v\n", err)
		var u usageError
		if errors.As(err, &u) {
			fmt.Fprint(os.Stderr, usage)
		}
		return 1
	}
	rep, err := run(req)
	if err != nil {
		fmt.Fprintf(os.Stderr, "sudo: %v\n", err)
		return 1
	}
	if rep.Error != "" {
		fmt.Fprintf(os.Stderr, "sudo: %s\n", rep.Error)
	}
	if rep.Signal > 0 {
		dieBy(rep.Signal)
	}
	return rep.Exit
}

// dieBy ends sudo by the signal that ended its command, as sudo does (so
// that a shell sees its job killed by it); a signal whose default is not
// to end a process leaves sudo to exit with 128+sig. The Go runtime's own
// handler is put back to the default first: some (SIGSEGV) it would take
// for a fault of its own, some (SIGPIPE) it ignores when sent.
func dieBy(sig int) {
	setAction(sig, sigaction{})
	unix.Kill(os.Getpid(), syscall.Signal(sig))
}

// sigaction is the kernel's struct sigaction (x86_64 and arm64); the zero
// value is SIG_DFL. The Go runtime keeps its own handler for signals such
// as SIGTSTP once os/signal has asked for them, even after signal.Reset,
// so sudo sets the default action itself where it must stop or die by one.
type sigaction struct {
	handler, flags, restorer, mask uint64
}

// setAction sets sig's action to act, and returns the one it had.
func setAction(sig int, act sigaction) sigaction {
	var old sigaction
	unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&act)), uintptr(unsafe.Pointer(&old)), 8, 0, 0)
	return old
}

const usage = `usage: sudo [-EHinsS] [-u user] [-g group] [-D directory] [--preserve-env=list] [VAR=value] [--] command [arg ...]
       sudo -i | -s [command]
       sudo -v | -k | -K | -l | -V | -h
`

type usageError string

func (e usageError) Error() string { return string(e) }

// options are sudo's command line.
type options struct {
	user, group string
	keepEnv     bool     // -E
	keepList    []string // --preserve-env=list
	login       bool     // -i
	shell       bool     // -s
	setHome     bool     // -H
	dir         string   // -D
	assign      []string // VAR=value before the command
	cmd         []string
	done        bool // -v, -k, -K, -l, -V, -h: nothing to run
}

// withArg are the short options that take an argument.
const withArg = "ugpDCTUrt"

// parse reads sudo's options; -n, -S, -P, -A and -B change nothing where
// no password is ever asked.
func parse(args []string) (options, error) {
	o := options{user: "root"}
	i := 0
	for ; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			i++
			break
		}
		if len(a) < 2 || a[0] != '-' {
			break
		}
		var err error
		if strings.HasPrefix(a, "--") {
			i, err = o.long(args, i)
		} else {
			i, err = o.short(args, i)
		}
		if err != nil {
			return o, err
		}
	}
	for ; i < len(args) && isAssign(args[i]); i++ {
		o.assign = append(o.assign, args[i])
	}
	o.cmd = args[i:]
	if !o.done && len(o.cmd) == 0 && !o.login && !o.shell {
		return o, usageError("no command given")
	}
	return o, nil
}

func (o *options) short(args []string, i int) (int, error) {
	a := args[i]
	for j := 1; j < len(a); j++ {
		c := a[j]
		if strings.IndexByte(withArg, c) >= 0 {
			v := a[j+1:]
			if v == "" {
				if i+1 >= len(args) {
					return i, usageError(fmt.Sprintf("option -%c requires an argument", c))
				}
				i++
				v = args[i]
			}
			return i, o.set(string(c), v)
		}
		if err := o.flag(string(c)); err != nil {
			return i, err
		}
	}
	return i, nil
}

func (o *options) long(args []string, i int) (int, error) {
	name, v, has := strings.Cut(args[i][2:], "=")
	if name == "preserve-env" {
		o.keepEnv = !has
		if has {
			o.keepList = append(o.keepList, strings.Split(v, ",")...)
		}
		return i, nil
	}
	short := map[string]string{"user": "u", "group": "g", "prompt": "p", "chdir": "D", "close-from": "C",
		"command-timeout": "T", "other-user": "U", "role": "r", "type": "t"}
	if s, ok := short[name]; ok {
		if !has {
			if i+1 >= len(args) {
				return i, usageError("option --" + name + " requires an argument")
			}
			i++
			v = args[i]
		}
		return i, o.set(s, v)
	}
	flags := map[string]string{"login": "i", "shell": "s", "set-home": "H", "non-interactive": "n", "stdin": "S",
		"validate": "v", "reset-timestamp": "k", "remove-timestamp": "K", "list": "l", "version": "V", "help": "h",
		"preserve-groups": "P", "askpass": "A", "bell": "B", "background": "b"}
	s, ok := flags[name]
	if !ok || has {
		return i, usageError("unknown option --" + name)
	}
	return i, o.flag(s)
}

func (o *options) set(opt, v string) error {
	switch opt {
	case "u":
		o.user = v
	case "g":
		o.group = v
	case "D":
		o.dir = v
	case "p", "C", "T":
	default:
		return fmt.Errorf("option -%s (another user's timestamp, SELinux) is not supported in an msb sandbox", opt)
	}
	return nil
}

func (o *options) flag(f string) error {
	switch f {
	case "E":
		o.keepEnv = true
	case "H":
		o.setHome = true
	case "i":
		o.login = true
	case "s":
		o.shell = true
	case "n", "S", "P", "A", "B":
	case "v", "k", "K":
		o.done = true
	case "V":
		fmt.Println("Sudo version 1.9 (msb's sudo: the sandbox's supervisor starts the command)")
		o.done = true
	case "h":
		fmt.Print(usage)
		o.done = true
	case "l":
		fmt.Println("User may run the following commands:\n    (ALL : ALL) NOPASSWD: ALL")
		o.done = true
	case "b":
		return errors.New("option -b (run in the background) is not supported in an msb sandbox: end the command with &")
	default:
		return usageError("invalid option -- '" + f + "'")
	}
	return nil
}

// isAssign says whether a is VAR=value with a valid name.
func isAssign(a string) bool {
	name, _, ok := strings.Cut(a, "=")
	if !ok || name == "" {
		return false
	}
	for i, c := range name {
		if c != '_' && !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// request is what o asks the supervisor to start, for a caller whose
// environment is env.
func (o options) request(env []string) (Request, error) {
	target, err := lookupUser(o.user)
	if err != nil {
		return Request{}, err
	}
	gid := target.gid
	if o.group != "" {
		if gid, err = lookupGroup(o.group); err != nil {
			return Request{}, err
		}
	}
	argv, dir, err := o.argv(target, env)
	if err != nil {
		return Request{}, err
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return Request{}, fmt.Errorf("unable to change directory to %s", dir)
	}
	return Request{Argv: argv, Env: o.env(target, env, argv), Dir: dir, UID: target.uid, GID: gid,
		Groups: groupsOf(target.name, gid)}, nil
}

// argv is the program to start and its arguments, and where: a shell for
// -i and -s (the command escaped as sudo escapes it), else the command
// looked up in securePath.
func (o options) argv(target account, env []string) ([]string, string, error) {
	dir, _ := os.Getwd()
	if o.dir != "" {
		dir = o.dir
	}
	switch {
	case o.login:
		argv := []string{target.shell, "-l"}
		if len(o.cmd) > 0 {
			argv = append(argv, "-c", escape(o.cmd))
		}
		if o.dir == "" {
			dir = target.home
		}
		return argv, dir, nil
	case o.shell:
		sh := getenv(env, "SHELL")
		if sh == "" {
			sh = target.shell
		}
		argv := []string{sh}
		if len(o.cmd) > 0 {
			argv = append(argv, "-c", escape(o.cmd))
		}
		return argv, dir, nil
	}
	prog, err := lookPath(o.cmd[0], dir)
	if err != nil {
		return nil, "", err
	}
	return append([]string{prog}, o.cmd[1:]...), dir, nil
}

// escape joins a command for a shell's -c as sudo does: every character
// but letters, digits, '_', '-' and '$' behind a backslash.
func escape(cmd []string) string {
	var b strings.Builder
	for i, a := range cmd {
		if i > 0 {
			b.WriteByte(' ')
		}
		for _, c := range a {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '$') {
				b.WriteByte('\\')
			}
			b.WriteRune(c)
		}
	}
	return b.String()
}

// lookPath finds name as sudo does: as given when it holds a '/'
// (relative to dir), else in securePath.
func lookPath(name, dir string) (string, error) {
	if strings.Contains(name, "/") {
		p := name
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		if fi, err := os.Stat(p); err != nil || fi.IsDir() {
			return "", fmt.Errorf("%s: command not found", name)
		}
		return p, nil
	}
	for _, d := range filepath.SplitList(securePath) {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: command not found", name)
}

// env is the command's environment: the caller's with -E (and the names
// --preserve-env lists), else a reset one as sudo's env_reset makes;
// either way PATH is securePath, USER and LOGNAME the target's, and the
// SUDO_ variables say who asked; VAR=value arguments come last.
func (o options) env(target account, caller, argv []string) []string {
	names := append(slices.Clone(keptEnv), o.keepList...)
	keep := func(k string) bool {
		return o.keepEnv && !o.login || strings.HasPrefix(k, "LC_") || slices.Contains(names, k)
	}
	var out []string
	for _, kv := range caller {
		k, _, _ := strings.Cut(kv, "=")
		if keep(k) && !strings.HasPrefix(k, "SUDO_") && !strings.HasPrefix(k, "BASH_FUNC_") {
			out = append(out, kv)
		}
	}
	set := map[string]string{"PATH": securePath, "USER": target.name, "LOGNAME": target.name, "USERNAME": target.name}
	if !o.keepEnv || o.login || o.setHome {
		set["HOME"], set["SHELL"], set["MAIL"] = target.home, target.shell, "/var/mail/"+target.name
	}
	me, err := lookupUID(os.Getuid())
	if err != nil {
		me = account{name: fmt.Sprint(os.Getuid())}
	}
	set["SUDO_USER"], set["SUDO_UID"], set["SUDO_GID"] = me.name, fmt.Sprint(os.Getuid()), fmt.Sprint(os.Getgid())
	set["SUDO_COMMAND"] = strings.Join(argv, " ")
	for _, a := range o.assign {
		k, v, _ := strings.Cut(a, "=")
		set[k] = v
	}
	for i := 0; i < len(out); i++ {
		k, _, _ := strings.Cut(out[i], "=")
		if _, ok := set[k]; ok {
			out = append(out[:i], out[i+1:]...)
			i--
		}
	}
	for k, v := range set {
		out = append(out, k+"="+v)
	}
	return out
}

func getenv(env []string, name string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			return v
		}
	}
	return ""
}

// run sends req with this process's stdio to the supervisor, passes on
// the signals it gets, and returns the supervisor's reply. Run from a
// terminal, the command gets a new one of its own (terminal).
func run(req Request) (Reply, error) {
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: Socket, Net: "unix"})
	if err != nil {
		return Reply{}, fmt.Errorf("this sandbox offers no sudo (its supervisor's socket %s: %v)", Socket, errors.Unwrap(err))
	}
	defer c.Close()
	term, err := openTerminal()
	if err != nil {
		return Reply{}, err
	}
	stdio := []int{0, 1, 2}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1,
		syscall.SIGUSR2, syscall.SIGWINCH, syscall.SIGALRM, syscall.SIGCONT)
	if term != nil {
		defer term.stop() // after the reply: the command's last output, then the caller's mode back
		signal.Ignore(syscall.SIGTTOU, syscall.SIGTTIN)
		signal.Notify(sigs, syscall.SIGTSTP) // for the command, whose stop then stops sudo
		stdio, req.Terminal = term.stdio(), true
	}
	defer signal.Stop(sigs)
	if _, _, err := c.WriteMsgUnix([]byte{0}, unix.UnixRights(stdio...), nil); err != nil {
		return Reply{}, fmt.Errorf("passing stdio to the supervisor: %w", err)
	}
	if err := wire.WriteFrame(c, req); err != nil {
		return Reply{}, fmt.Errorf("sending the command to the supervisor: %w", err)
	}
	if term != nil {
		term.start()
	}
	go func() {
		for s := range sigs { // the one writer once the request is sent
			if !forward(s, term) {
				continue
			}
			wire.WriteFrame(c, Control{Signal: int(s.(syscall.Signal))})
		}
	}()
	for {
		var rep Reply
		if err := wire.ReadFrame(c, &rep); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return Reply{}, errors.New("the supervisor closed the connection before the command ended (the sandbox is closing)")
			}
			return Reply{}, fmt.Errorf("reading the command's end: %w", err)
		}
		if rep.Stopped == 0 || term == nil {
			return rep, nil
		}
		term.suspend(rep.Stopped)
	}
}

// forward handles a signal sudo got and says whether it is for the
// command too. With a terminal of its own, the command learns of a new
// window size from it (the caller's copied over), and a continued sudo
// sets the caller's terminal's mode again and continues the command's
// job; without one, SIGCONT is not passed on.
func forward(s os.Signal, term *terminal) bool {
	switch {
	case term != nil && s == syscall.SIGWINCH:
		term.resize()
		return false
	case s == syscall.SIGCONT:
		if term == nil {
			return false
		}
		term.continued()
		return true // the command's job, which stopped sudo, goes on too
	}
	return true
}
