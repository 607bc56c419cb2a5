// Package session runs persistent shell sessions for agents: a bash whose
// working directory, variables, functions, aliases and options persist from
// one command to the next, and whose framing (where a command's output ends
// and what its exit status was) nothing the command prints or changes can
// confuse. It runs inside the sandbox (the sandbox's init uses it) and simply
// starts bash with os/exec; RunOnce runs a single command in a fresh
// `bash -c` with the same result semantics.
//
// # Nouns
//
// A Session is one long-lived `bash --noprofile --norc --noediting -i`,
// started in its own session and process group (setsid), with an
// environment marker (MarkerEnv=<random>) that every process it starts
// inherits.
//
// A frame is the single line the engine writes to the shell's stdin for one
// command:
//
//	\builtin eval $'<command>' <STDIN >|OUT 2>&1; \builtin printf '<nonce> %d\n' "$?" >|STATUS
//
// The command text travels as one ANSI-C quoted word in which every byte
// outside printable ASCII (and ', \, !) is escaped, so the frame is always
// exactly one line and bash parses all of it, nonce included, before the
// command starts. eval of a quoted word turns a syntax error in the command
// into exit status 2 instead of a broken frame. The redirections on eval hold
// for everything the command does and are undone when it returns, so
// `exec >/dev/null`, `exec 2>&1` or `exec 0<&-` in a command last only for
// that command. \builtin is quoted so that aliases do not apply.
//
// A nonce is 128 random bits, fresh for every frame. Only a status line that
// starts with the current nonce counts; the command cannot know it before it
// runs (it is not in the command's environment, arguments or input).
//
// The status channel is a pipe the engine holds. The shell does not keep a
// descriptor for it: each frame opens it by path, for the one printf. The
// same holds for the command's stdin (a pipe nobody ever writes to, so
// `read`, `cat` or `python3 -i` wait until the timeout; an interactive
// command's stdin is the session's terminal instead, see below) and its output pipes
// (fresh ones for every command). Closing or redirecting descriptors in a
// command therefore cannot take the channel away, and no process the command
// starts inherits it. The paths are named pipes (FIFOs) with random names in
// the channel dir (Options.ChanDir; inside a sandbox, a directory of the
// sandbox's own /dev), which the engine makes and opens before it sends the
// frame and removes once the command is done. Named pipes rather than the
// engine's /proc/<pid>/fd entries: the engine may be a process its commands
// cannot reach through /proc (a sandbox's supervisor is not dumpable).
//
// # Design
//
// The shell is interactive (-i) because only an interactive bash treats
// SIGINT as Ctrl-C at a prompt: it abandons the rest of the command line
// (loops, `read`, a list of commands) and reads the next line, keeping all
// state. A non-interactive bash would exit, and traps cannot reliably abort a
// list. The interactive features that would interfere are turned off at
// start (history, history expansion, prompts, TMOUT, PROMPT_COMMAND); the
// shell's own stderr goes to /dev/null; a pty that carries no data serves as
// the "terminal" bash restores after a job dies of a signal.
//
// Completion is signalled by the status line, never by end-of-file on the
// output: background jobs may hold the output pipe open forever. When the
// status arrives, everything the command's waited-for processes wrote is
// already in the pipe; the engine reads exactly that much (FIONREAD), so a
// background job that keeps writing cannot prolong Exec. If background jobs
// still hold the pipe, it is handed to a goroutine that drains and discards
// it until they close it: their output after their command completed is
// discarded (it never appears in a later command's result, and the jobs
// neither block nor die of SIGPIPE). Output they write while their command
// is still running is part of that command's output. To keep a background
// job's output, redirect it to a file.
//
// Because every frame ends with printf, $? would read 0 in the next command;
// the next frame restores it first with a small function defined at start
// (`__msb_rc_<hex> N && :`, which trips neither set -e nor an ERR trap).
//
// Timeouts (and a cancelled context) interrupt the command like Ctrl-C:
// SIGINT to the shell and then to the processes the command started (the
// shell's children that were not there before it, and their descendants;
// background jobs of earlier commands are left alone). The shell comes
// first because bash abandons the rest of a list only if it has seen the
// interrupt before its foreground job dies of it; processes that appear or
// exec after the interrupt (the shell was forking) get one of their own,
// the shell again first. On kernels without
// /proc/<pid>/task/<tid>/children, "not there before" is judged by start
// time, so a job started less than one clock tick (10 ms) before the
// command counts as the command's. The shell is signalled only while it
// runs the command (its stdin is then the command's, not the frame pipe): an
// interrupt while it reads or parses a line would make it run the rest of
// the line as a command. The shell abandons the
// line, including its printf; once it is back at its input, which the engine
// sees in /proc/<pid>/syscall (blocked in read(2) on its stdin, the frame
// pipe, which is empty), a recovery frame asks for "$?" under a second
// nonce. A fork the shell made just before the interrupt may exec its
// program only after that answer; the command's processes still alive then
// are watched, and one that execs later gets its SIGINT then (otherwise it
// ran on and the shell waited for it in the next command). After KillGrace, what is left of the command gets SIGKILL and the
// shell SIGINT again; after twice KillGrace the shell itself is killed and
// the session ends. Exec therefore returns at most Timeout + 2*KillGrace
// after it started. The same idle check, every 100 ms, notices a shell that
// finished a frame without reporting (ErrStatusLost) instead of waiting
// forever.
//
// Output is capped per stream: the first and last halves of the cap are kept
// and joined by a line saying how many bytes were omitted; memory is bounded
// by the cap whatever the command prints. Output is returned as valid UTF-8
// without NUL: other bytes appear as the four characters \xNN.
//
// Close kills, with SIGKILL, the shell, its descendants, every process of
// its session (jobs that left its process group, even with their
// environment cleared) and every process carrying the session's marker
// (`setsid cmd &`, double forks). It stops them first (SIGSTOP), pass after
// pass until a pass finds nothing new: a stopped process cannot fork and
// its children stay its children, whereas a fork loop killed at once
// re-parents the children it forked last away from the tree. It then
// waits for them to die, and returns an error wrapping ErrSurvivors that
// names those still alive some 1.3 s after their SIGKILL (in D state, or
// in a frozen cgroup v1 freezer) instead of returning as if done. RunOnce
// ends what its command left the same way. Not found: a process that left
// the session, cleared its environment and was re-parented before Close
// began; inside a sandbox the PID namespace ends it with the sandbox. The
// sandbox's cgroup cannot stand in: it holds the supervisor and every
// session, so killing it ends the sandbox, not one session or command.
//
// # Interactive commands
//
// An interactive command (ExecRequest.Interactive) is an ordinary frame
// whose stdin is the session's terminal, a pseudo-terminal the engine
// holds both ends of, instead of the pipe nobody writes to. A REPL sees a
// tty on its stdin and prompts and reads line by line; its output still
// goes to the frame's fresh pipes, merged. The terminal does not echo
// (what the caller sends is not output), its control characters are data
// (Ctrl-C is the session's interrupt, which knows the command's
// processes), "\n" stays "\n"; input is passed on line by line, and a
// line longer than the terminal's 4095 bytes is cut. What a process writes
// to it (/dev/tty) is read into the running command's output. Input left unread by an
// earlier interactive command is discarded before the next starts. The
// first frame that opens it makes it the shell's controlling terminal;
// since the engine holds both ends until Close, it never hangs up.
//
// The caller writes to the terminal with Input requests while the
// command runs, and every call waits for one of three ends: the status
// line of the command's frame (it completed; the nonce rules above hold,
// so nothing the program prints, a prompt or a status-like line, can
// fake it); the earliest match of the call's Expect patterns in the
// output not yet returned (Result.Running, Result.Matched; the output
// before the match is returned, the match consumed, the rest kept for
// the next call); or the call's Timeout (Result.Running and TimedOut;
// the output so far is shown but kept, and the command is not
// interrupted). Between calls nobody reads the command's pipes, so a
// program that prints more than a pipe holds waits for the next call, as
// at a terminal nobody looks at. Pending output is bounded by MaxOutput
// (oldest bytes dropped, Truncated). An Input with Interrupt first
// interrupts the command as a timeout does; a match of Expect (python3
// survives SIGINT and prompts again) stops the escalation there, and the
// command runs on. While an interactive command runs, Exec accepts only
// Input (ErrInteractiveRunning); Input with none running is
// ErrNotInteractive. A normal command's stdin stays the pipe nobody
// writes to.
//
// # Semantics worth knowing
//
// Commands run as typed at an interactive prompt: aliases expand, `exit`
// prints "exit", a background job prints "[1] <pid>", a job killed by a
// signal is reported as in a terminal, and set -x shows "++" (eval adds a
// level). PROMPT_COMMAND, if a command sets it, runs between commands with
// its output discarded; if it hangs, the next command times out. `exit`, `exec prog`, and `set -e`
// followed by a failing command end the shell (Result.SessionEnded, with the
// shell's status); later Exec calls return ErrSessionEnded, and a new
// session can be started. One difference from a prompt: with set -e on, a
// command whose overall status is non-zero ends the shell even if that
// status came from an `a && b` list, because eval returns it.
//
// # Limits
//
// The framing resists accidents and ordinary agent behaviour, not a
// deliberately hostile process with the shell's privileges. Such a process
// could read the shell's memory (/proc/<pid>/mem) or turn history back on to
// learn the current nonce, open the named pipes in the channel dir to
// write output or status lines (or remove them), open the session's
// terminal to type into an interactive command, define a function
// named `builtin` or disable builtins (enable -n) so that frames misbehave
// (reported as ErrStatusLost or a timeout), or set PROMPT_COMMAND to
// something that reads the frame pipe. Sandboxing, not this package, bounds
// what such a process can reach.
package session
