// Package e2b is msb's E2B-compatible front end: it answers the e2b SDKs
// pointed at it with E2B_API_URL and E2B_SANDBOX_URL, as a thin adapter over
// the engine.
//
// The nouns are E2B's. The control plane is E2B's REST API (create, list,
// get, kill, set the timeout of, pause, connect to and fork sandboxes, and
// their snapshots), authenticated by the daemon's token sent as X-API-Key. A
// template names what a sandbox starts from: an msb instance id, a snapshot,
// or base, a sandbox on the host's system directories. A paused sandbox is a
// snapshot under its E2B id; a resumed one is a new engine sandbox under the
// same E2B id. A record is what outlives the daemon: one file in the cache
// per template with a ready build and per paused sandbox, loaded by Restore
// (records.go, restore.go). A shutdown pause is the pause a stopping daemon
// gives each running sandbox, so that the next one resumes it (shutdown.go). The sandbox plane (E2B calls it envd) is Connect-RPC
// (process.Process, filesystem.Filesystem, generated from E2B's protobuf
// files under envd/) plus HTTP /files and /health; one listener serves every
// sandbox, picked by the E2b-Sandbox-Id header and authenticated by the
// sandbox's access token (X-Access-Token), which create returns. A process
// is one command started through process.Process, known by a pid this front
// end numbers itself; it runs apart from the streams that read it and keeps
// a bounded log of its output, which a stream reads from an offset (Connect:
// from where the last stream left off); a pause that keeps the sandbox's
// processes keeps it, and the resume attaches it to its restored command
// (pause.go). A primed shell is the login shell
// of a sandbox's next commands.run, started when its last command ended
// and handed the next one of the same cwd and envs (primed.go). A watcher is one directory watch
// (WatchDir, CreateWatcher): an inotify instance on the sandbox's own view of
// a directory with a bounded queue of E2B's filesystem events; it ends with
// its sandbox. See docs/e2b.md.
package e2b

//go:generate protoc -I envd --go_out=envd --go_opt=paths=source_relative --connect-go_out=envd --connect-go_opt=paths=source_relative process/process.proto filesystem/filesystem.proto
