package wire

// Config is everything the sandbox's init needs to build the sandbox. The
// host resolves and checks it; init only carries it out.
type Config struct {
	ID     string   `json:"id"`
	Root   string   `json:"root"`   // mount point of the overlay root (host path, in init's mount namespace)
	Lowers []string `json:"lowers"` // bottom first
	Upper  string   `json:"upper"`
	// RootBind, when set, is bound as the root instead of the overlay.
	RootBind  string `json:"root_bind,omitempty"`
	Work      string `json:"work"`
	UserXattr bool   `json:"userxattr,omitempty"`
	Rootless  bool   `json:"rootless,omitempty"`
	// HostDirs are host system directories bound read-only at the same path.
	HostDirs []string `json:"host_dirs,omitempty"`
	// Masks are paths inside the sandbox hidden behind /dev/null or an empty dir.
	Masks    []string `json:"masks,omitempty"`
	Binds    []Bind   `json:"binds,omitempty"`
	Hostname string   `json:"hostname"`
	Network  string   `json:"network"` // "none" or "host"
	TmpBytes int64    `json:"tmp_bytes"`
	ShmBytes int64    `json:"shm_bytes"`
	Workdir  string   `json:"workdir"`
	Env      []string `json:"env"`
	UID      int      `json:"uid"`
	GID      int      `json:"gid"`
	// Rlimits applied to every process in the sandbox (the fallback where no
	// cgroup holds the limits).
	Rlimits   []Rlimit `json:"rlimits,omitempty"`
	CgroupNS  bool     `json:"cgroupns"`
	MaxOutput int      `json:"max_output,omitempty"`
}

// Bind is a host path mounted into the sandbox.
type Bind struct {
	Source   string `json:"source"`
	Target   string `json:"target"`
	ReadOnly bool   `json:"ro"`
}

// Rlimit is one setrlimit(2).
type Rlimit struct {
	Resource int    `json:"resource"`
	Name     string `json:"name"`
	Value    uint64 `json:"value"`
}
