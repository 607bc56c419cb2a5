package wire

// SessionStart is a session the supervisor opens as part of its start,
// with the options of OpSessionOpen's Request: its shell starts while the
// supervisor makes its spare threads instead of after the host's request.
type SessionStart struct {
	Name string   `json:"name"`
	Env  []string `json:"env,omitempty"` // added to the sandbox's
	Dir  string   `json:"dir,omitempty"` // default: the sandbox's workdir
}
