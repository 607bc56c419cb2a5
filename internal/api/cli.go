package api

// CLIError is what msb prints on stderr, as one JSON line, when a command
// given --json fails: stdout keeps the command's own answer (or nothing),
// so a reader parses each stream with one JSON decoder.
type CLIError struct {
	Error CLIErrorInfo `json:"error"`
}

// CLIErrorInfo says what went wrong. Code is the error's kind: an
// ErrorCode (not_found, conflict, invalid_config, ...), the same for an
// error met in msb and one the daemon answered, or one of the CLI's own
// (usage, unsupported_host, bad_image, failure, interrupted, exit_status,
// command_not_found, not_executable).
type CLIErrorInfo struct {
	Code     string `json:"code"`
	Message  string `json:"message"`
	ExitCode int    `json:"exit_code"`
}

// Version is msb version --json: the build's module version and the
// version control state it was built from (empty when the build did not
// record it, as with go run or go test).
type Version struct {
	Version  string `json:"version"`
	Revision string `json:"revision,omitempty"`
	Time     string `json:"time,omitempty"`
	Modified bool   `json:"modified,omitempty"`
	Go       string `json:"go"`
}
