package api

// Fork process modes (ForkRequest.Processes).
const (
	// ForkProcessesNone: a child starts with no process of the parent;
	// its sessions are new shells in the recorded cwd and environment.
	ForkProcessesNone = "none"
	// ForkProcessesAll: each child goes on with every process of the
	// parent (its sessions' shells and what they started), restored from
	// one CRIU dump taken in the same freeze as the snapshot of the
	// parent's writes; the parent runs on. Root mode only, with a usable
	// criu (4.x) on the daemon's host; a fork that cannot carry them fails
	// (400) naming why, never starting children without them.
	ForkProcessesAll = "all"
)

// SnapshotRequest names the snapshot of a live sandbox (letters, digits
// and ._@+=:,~-, at most 128, starting with a letter or digit); an empty
// name is made up (snap-<sandbox id>-<time>).
type SnapshotRequest struct {
	Name string `json:"name,omitempty"`
	// Processes "all" (ForkProcessesAll) dumps the sandbox's running
	// processes with CRIU in the same freeze as its files and keeps the
	// dump with the snapshot: a fork of the snapshot with processes "all"
	// goes on with them, also once the sandbox is closed (a pause). Root
	// mode with criu 4.x only (400 saying why otherwise); "" or "none":
	// files only.
	Processes string `json:"processes,omitempty"`
}

// SnapshotSession is one session of a sandbox as a snapshot recorded it:
// the shell's working directory and environment (NAME=value) when the
// snapshot was taken. A fork or a rollback reopens the session with them.
type SnapshotSession struct {
	Name string       `json:"name"`
	Cwd  string       `json:"cwd"`
	Env  List[string] `json:"env"`
}

// SnapshotInfo describes a snapshot: the files a sandbox had written, as
// one immutable content-addressed layer over the sandbox's own layers, and
// its sessions' state.
type SnapshotInfo struct {
	// Name is the snapshot's name (empty for an anonymous one).
	Name string `json:"name"`
	// Layer is the digest of the layer holding what the sandbox wrote.
	Layer string `json:"layer"`
	// Sandbox is the id of the sandbox the snapshot was taken of.
	Sandbox string `json:"sandbox"`
	// InstanceID is the source sandbox's instance (empty for a sandbox
	// made from raw layers); forks of it are task sandboxes of it.
	InstanceID string `json:"instance_id,omitempty"`
	CreatedAt  string `json:"created_at"` // RFC 3339
	// Bytes and Files count the content the layer holds (what the
	// sandbox wrote, before dedup against the cache).
	Bytes    int64                 `json:"bytes"`
	Files    int                   `json:"files"`
	Sessions List[SnapshotSession] `json:"sessions"`
}

// ForkRequest asks for Count new sandboxes, each starting from one state
// of a sandbox.
type ForkRequest struct {
	// Count is the number of children (0 means 1; at most 256). Each is
	// admitted as a create, without waiting: past the quota the fork
	// fails (429, the limit named) and leaves no child.
	Count int `json:"count,omitempty"`
	// Snapshot names a snapshot of the sandbox to fork from; empty takes
	// a snapshot of the live state first.
	Snapshot string `json:"snapshot,omitempty"`
	// Labels are added to the labels the children inherit.
	Labels Map[string, string] `json:"labels,omitempty"`
	// Processes says what becomes of the parent's running processes:
	// "none" (the default): a child starts its sessions anew in the
	// recorded cwd and environment; "all": a child goes on with them
	// (ForkProcessesAll: a fork of a live sandbox, not of a named
	// snapshot; root mode and criu 4.x on the daemon's host).
	Processes string `json:"processes,omitempty"`
	// Warm, on a fork of a named snapshot alone, asks the daemon to keep
	// that many children of the snapshot started ahead for the next forks
	// (bounded by its --spares; 0 keeps what an earlier fork asked). On a
	// fork of a live raw sandbox in root mode it asks for that many
	// sandboxes of its children's shape, which the next forks of a sandbox
	// of that shape put on their snapshots (0: as many as this fork's
	// count).
	Warm int `json:"warm,omitempty"`
}

// RollbackRequest resets a sandbox in place (same id): its processes are
// killed, its writes dropped, and its sessions restarted.
type RollbackRequest struct {
	// Snapshot names the snapshot to return to; empty returns to the
	// sandbox's state at creation.
	Snapshot string `json:"snapshot,omitempty"`
}

// SnapshotList is GET /v1/snapshots: the named snapshots, oldest first.
type SnapshotList struct {
	Snapshots List[SnapshotInfo] `json:"snapshots"`
}
