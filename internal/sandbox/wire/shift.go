package wire

// ShiftPlan is what the shift stage (sbinit.StageShift) does, as root of a
// user namespace that maps the caller's subordinate ids: fill Dir, and
// the directory layers Dirs, empty directories of the caller's, with
// Entries.
type ShiftPlan struct {
	Dir     string       `json:"dir"`
	Dirs    []string     `json:"dirs,omitempty"`
	Entries []ShiftEntry `json:"entries"`
}

// ShiftEntry is a path made in the plan's Dir (Layer 0) or Dirs[Layer-1]:
// a copy of the same path under From (a layer's tree), with its mode,
// times, extended attributes (not the overlay's own) and, for a symlink,
// its target, owned by UID and GID. Entries come in order, a directory
// before what it holds; a regular file whose inode an earlier entry copied
// is a hard link to that copy.
type ShiftEntry struct {
	Path  string `json:"path"` // relative, slash-separated; "." is the layer's dir itself
	From  string `json:"from"`
	UID   int    `json:"uid"`
	GID   int    `json:"gid"`
	Layer int    `json:"layer,omitempty"`
}
