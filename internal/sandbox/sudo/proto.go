package sudo

// Socket is the supervisor's sudo socket inside the sandbox, in its own
// /dev (a tmpfs init makes), open to every user of the sandbox.
const Socket = "/dev/.msb-sudo"

// Request is the client's first frame: what to start and as whom. The
// client's stdin, stdout and stderr come with the byte before it; with
// Terminal, those of them that are terminals are already the follower of
// the client's new pseudo-terminal (see terminal), which the command takes
// as its controlling terminal in a session of its own.
type Request struct {
	Argv   []string `json:"argv"` // Argv[0] is the program's path, resolved by the client
	Env    []string `json:"env"`
	Dir    string   `json:"dir"`
	UID    int      `json:"uid"`
	GID    int      `json:"gid"`
	Groups []int    `json:"groups,omitempty"`
	// Terminal: the command runs in a new session whose controlling
	// terminal is the first of its stdin, stdout and stderr that is one.
	Terminal bool `json:"terminal,omitempty"`
}

// Control is a frame the client sends after the request: a signal it got,
// for the command.
type Control struct {
	Signal int `json:"signal"`
}

// Reply is the supervisor's last frame: the command's exit status (128+n
// for a command a signal ended, and Signal n, which sudo then ends itself
// with, as sudo does), or why it did not start. Before it, a command on a
// terminal of its own (Request.Terminal) may be reported Stopped, by that
// signal, any number of times: sudo then stops itself likewise, and
// passes SIGCONT on when it is continued.
type Reply struct {
	Exit    int    `json:"exit"`
	Signal  int    `json:"signal,omitempty"`
	Stopped int    `json:"stopped,omitempty"`
	Error   string `json:"error,omitempty"`
}
