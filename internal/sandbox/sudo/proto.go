package sudo

// Socket is the supervisor's sudo socket inside the sandbox, in its own
// /dev (a tmpfs init makes), open to every user of the sandbox.
const Socket = "/dev/.msb-sudo"

// Request is the client's first frame: what to start and as whom. The
// client's stdin, stdout and stderr come with the byte before it.
type Request struct {
	Argv   []string `json:"argv"` // Argv[0] is the program's path, resolved by the client
	Env    []string `json:"env"`
	Dir    string   `json:"dir"`
	UID    int      `json:"uid"`
	GID    int      `json:"gid"`
	Groups []int    `json:"groups,omitempty"`
}

// Control is a frame the client sends after the request: a signal it got,
// for the command.
type Control struct {
	Signal int `json:"signal"`
}

// Reply is the supervisor's one frame: the command's exit status (128+n
// for a command a signal ended), or why it did not start.
type Reply struct {
	Exit  int    `json:"exit"`
	Error string `json:"error,omitempty"`
}
