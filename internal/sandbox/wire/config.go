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
	// Disk, when set, is the filesystem init mounts first, holding Upper
	// Upper and Work, /tmp and /dev/shm.
	Disk *Disk `json:"disk,omitempty"`
	// HostDirs are host system directories bound read-only at the same path.
	HostDirs []string `json:"host_dirs,omitempty"`
	// HostIdmap binds HostDirs through an idmapped mount whose user
	// namespace (init's descriptor IdmapFd) maps no host id: the sandbox
	// then reads in them only what their permissions give everyone.
	HostIdmap bool `json:"host_idmap,omitempty"`
	// Masks are paths inside the sandbox hidden behind /dev/null or an empty dir.
	Masks    []string `json:"masks,omitempty"`
	Binds    []Bind   `json:"binds,omitempty"`
	Hostname string   `json:"hostname"`
	Network  string   `json:"network"` // "none" or "host"
	TmpBytes int64    `json:"tmp_bytes"`
	ShmBytes int64    `json:"shm_bytes"`
	// LimitInodes bounds the inodes of the sandbox's tmpfs by their size:
	// set where no cgroup charges the kernel memory of files to the sandbox.
	LimitInodes bool     `json:"limit_inodes,omitempty"`
	Workdir     string   `json:"workdir"`
	Env         []string `json:"env"`
	UID         int      `json:"uid"`
	GID         int      `json:"gid"`
	// Owners are paths of the root (relative) that init chowns once the
	// root is built, before the pivot: see sandbox.Config.Owners.
	Owners []Owner `json:"owners,omitempty"`
	// Rlimits applied to every process in the sandbox (the fallback where no
	// cgroup holds the limits).
	Rlimits   []Rlimit `json:"rlimits,omitempty"`
	CgroupNS  bool     `json:"cgroupns"`
	MaxOutput int      `json:"max_output,omitempty"`
	// NoHugePages has the supervisor advise against transparent huge
	// pages on its own memory: the host's THP mode is "always".
	NoHugePages bool `json:"no_huge_pages,omitempty"`
	// Cgroup, when set, is mounted at /sys/fs/cgroup (see CgroupFS); else
	// that directory of the sandbox's read-only /sys stays empty.
	Cgroup *CgroupFS `json:"cgroup,omitempty"`
	// Iface, when set, is made in the sandbox's network namespace.
	Iface *Iface `json:"iface,omitempty"`
	// NetReady says init was born in a network namespace the host made
	// ahead with its loopback up and Iface made (sandbox.netPool): init
	// sets up no network of its own, and the host holds Iface's tap
	// device (a process of the sandbox holding one could not be dumped
	// without its namespace: package checkpoint).
	NetReady bool `json:"net_ready,omitempty"`
	// RootAhead says the host builds the part of the root that no
	// namespace of init's but its mount namespace shapes (sbinit.BuildAhead:
	// the disk, the overlay, the host dirs, /dev, /tmp, /etc/hosts) while
	// init's runtime starts, and says it is done with OpRootAhead after
	// the Config: init then mounts the rest (/proc, /sys, the binds and
	// masks). Should the host not get to start (OpRootSelf), init builds
	// it all.
	RootAhead bool `json:"root_ahead,omitempty"`
	// Sudo has the supervisor answer sudo's requests on sudo.Socket (the
	// host binds the init binary at the sandbox's sudo path).
	Sudo bool `json:"sudo,omitempty"`
	// Session, when set, is a session the supervisor opens before it
	// answers ready (sandbox.Config.Session).
	Session *SessionStart `json:"session,omitempty"`
	// Stamps are the moments init reached its steps, which it hands on to
	// the supervisor (see Ready.Stamps); the host sends none.
	Stamps []Stamp `json:"stamps,omitempty"`

	binary bool // decoded from a binary frame
}

// Binary says c came in a binary frame: its sender, the host, reads them.
// A host of an msb before the binary encoding sends JSON and reads only
// JSON: an older daemon still running when msb-sandbox beside it was
// replaced (an upgrade), whose supervisors must then answer in JSON from
// their first frame, the ready answer, on.
func (c *Config) Binary() bool { return c.binary }

// Stamp is the moment a sandbox stage reached a step, on CLOCK_MONOTONIC
// (which the host and the sandbox share: sandboxes have no time
// namespace), so that the host can place it among its own.
type Stamp struct {
	Step string `json:"step"`
	Mono int64  `json:"mono"` // nanoseconds
}

// IdmapFd is the descriptor of the idmap user namespace in init (after the
// control socket, fd 3).
const IdmapFd = 4

// Owner is a path of the root and the owner init gives it.
type Owner struct {
	Path string `json:"path"`
	UID  int    `json:"uid"`
	GID  int    `json:"gid"`
}

// SessionDir is the directory, inside the sandbox, where sessions make the
// named pipes their frames open (see package session); init makes it in the
// sandbox's own /dev, owned by the sandbox user.
const SessionDir = "/dev/.msb-session"

// Disk is the filesystem that holds a sandbox's writable layer.
type Disk struct {
	// Mount is where init mounts it (a host path, in init's namespace).
	Mount string `json:"mount"`
	// Device and Subvol: a btrfs subvolume of a pool device, whose quota
	// group holds the limit; the host made Upper and Work in it.
	Device string `json:"device,omitempty"`
	Subvol string `json:"subvol,omitempty"`
	// TmpfsBytes: else a tmpfs of this size, in which init makes Upper and
	// Work.
	TmpfsBytes int64 `json:"tmpfs_bytes,omitempty"`
	// Either way init makes the directory shm in it and binds it at
	// /dev/shm, so that one limit bounds what the sandbox writes to its
	// root (/tmp, a directory of it, among it) and /dev/shm together
	// (Config.TmpBytes and ShmBytes size tmpfs mounts at /tmp and /dev/shm
	// only where the sandbox has no Disk).

	// Fd, in init, is its descriptor of the mounted disk (O_PATH), which
	// the supervisor keeps and reports (Ready.DiskFd) so that the host
	// reaches the writable layer through /proc/<init>/fd/<Fd> (a
	// snapshot); 0 where it is not kept. The host never sets it; init
	// passes it on in the config of a supervisor it execs.
	Fd int `json:"fd,omitempty"`
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
