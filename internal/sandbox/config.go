package sandbox

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// ErrInvalidConfig marks a Config that cannot be built; the message says why.
var ErrInvalidConfig = errors.New("invalid sandbox config")

// DefaultHostDirs are the host directories a HostBase sandbox sees read-only.
var DefaultHostDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc"}

// hostMasks hide host secrets in /etc from a root-mode sandbox.
var hostMasks = []string{"/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-", "/etc/sudoers", "/etc/ssh"}

// Network modes.
const (
	NetworkNone = "none" // a namespace of its own, with no route out
	NetworkHost = "host" // the host's network; opt-in, for builds
	// NetworkFiltered: a namespace of its own with a way out through a
	// forwarder msb runs, under Config.NetPolicy (see NetPolicy).
	NetworkFiltered = "filtered"
)

// Config describes one sandbox.
type Config struct {
	// Layers are read-only root trees, bottom first, joined by overlayfs.
	Layers []string `json:"layers,omitempty"`
	// HostBase binds the host's system directories (HostDirs, or
	// DefaultHostDirs) read-only into the root.
	HostBase bool     `json:"host_base,omitempty"`
	HostDirs []string `json:"host_dirs,omitempty"`
	// UpperDir, when set, is the writable layer (kept after Close, e.g. to
	// commit it as a new layer); otherwise a private one is made and removed.
	UpperDir string `json:"upper_dir,omitempty"`
	// RootDir, instead of Layers, is a private writable directory used
	// directly as the root (copy mode, for hosts without overlayfs): writes
	// land in it, and it is the caller's to remove.
	RootDir string `json:"root_dir,omitempty"`
	// KeepUpper keeps the private upper dir after Close for debugging;
	// Sandbox.UpperDir says where.
	KeepUpper bool     `json:"keep_upper,omitempty"`
	Binds     []Bind   `json:"binds,omitempty"`
	Workdir   string   `json:"workdir,omitempty"`
	Env       []string `json:"env,omitempty"`
	Hostname  string   `json:"hostname,omitempty"`
	Network   string   `json:"network,omitempty"`
	// NetPolicy is what a NetworkFiltered sandbox may reach (nil: all but
	// the host's loopback).
	NetPolicy *NetPolicy `json:"net_policy,omitempty"`
	Limits    Limits     `json:"limits,omitempty"`
	// User is the uid:gid commands run as. In rootless mode 0:0 is the
	// caller; any other user maps the caller's subordinate ids (see
	// ErrNoSubIDs) and needs a tmpfs disk (a disk limit).
	User User `json:"user,omitempty"`
	// Owners give paths of the root other owners than the lower layers'
	// trees have (a rootless store's, all the caller's): init chowns them
	// in the overlay (a copy-up each) before the first command. Applied
	// where the sandbox can give those ids: in root mode, and rootless with
	// a User other than root.
	Owners []Owner `json:"owners,omitempty"`
	// ImageLayers, when above 0 and below len(Layers), is how many of the
	// bottom Layers are an image's own (a stack other sandboxes share,
	// with other layers above it): a rootless runtime's Shifter gives
	// them a shifted layer of their own, which every stack on the image
	// shares, and the layers above one chained on it (see Shifter).
	// Otherwise the whole stack gets one. Only what is shared depends on
	// it, never an owner.
	ImageLayers int `json:"image_layers,omitempty"`
	// MaxOutput caps the bytes of each output stream a command returns.
	MaxOutput int `json:"max_output,omitempty"`
	// HostReadAsRoot, in root mode, lets the sandbox read the host dirs with
	// root's rights, as a root container over a read-only bind would (the
	// masks of known secrets still apply). By default a root-mode sandbox
	// reads in them only what an unprivileged user could. Rootless sandboxes
	// always read with the caller's rights.
	HostReadAsRoot bool `json:"host_read_as_root,omitempty"`
	// Sudo, when set, is a path of the root (say /usr/bin/sudo) where the
	// sandbox's init binary is bound read-only as sudo: a process of the
	// sandbox that runs it has the supervisor start its command as the
	// user it names, root by default, in the same sandbox (package sudo).
	// Setuid programs cannot work there: every process has no_new_privs.
	// It gives nothing the sandbox's own user lacks (the supervisor's
	// user), so it matters where commands run as another user than that.
	Sudo string `json:"sudo,omitempty"`
	// Session, when set, is a session Create opens before it returns, as
	// OpenSession would with its name and options (a caller that opens one
	// at once saves a round trip and most of the shell's start: the
	// supervisor starts it while it makes its spare threads). A session
	// that does not start fails the create.
	Session *SessionStart `json:"session,omitempty"`
	// Stdio is what Run and Shell talk to (`msb run` and `msb shell` pass
	// the caller's stdin, stdout and stderr). The sandbox never holds these
	// files: msb relays them through pipes, so a command sees a pipe (never
	// a terminal or a host file it could reopen through /proc/self/fd).
	// Nil means /dev/null.
	Stdio *Stdio `json:"-"`
}

// Stdio are what a sandbox's Run and Shell commands are relayed to, from
// Create until Close. A nil field is /dev/null. In is read by a goroutine
// that ends at In's end of file or, after Close, at its next read. Out and
// Err are written by a goroutine each, so one Writer given as both must be
// safe for concurrent writes (an *os.File is; a bytes.Buffer is not), and
// what the two streams carry arrives in no set order between them.
type Stdio struct {
	In       io.Reader
	Out, Err io.Writer
}

// Bind mounts a host path into the sandbox.
type Bind struct {
	Source   string `json:"source"`
	Target   string `json:"target"`
	ReadOnly bool   `json:"read_only,omitempty"`
}

// Owner is a path of the root (relative, slash-separated) and the
// in-sandbox owner it gets.
type Owner struct {
	Path string `json:"path"`
	UID  int    `json:"uid"`
	GID  int    `json:"gid"`
}

// User is the in-sandbox uid and gid.
type User struct {
	UID int `json:"uid"`
	GID int `json:"gid"`
}

// Limits bound a sandbox's resources; zero means the default (see
// DefaultLimits), negative is an error. Runtime.Enforcement says what holds
// each one in a runtime's mode.
type Limits struct {
	MemoryBytes int64   `json:"memory_bytes,omitempty"`
	Pids        int64   `json:"pids,omitempty"`
	CPUs        float64 `json:"cpus,omitempty"`
	// TmpBytes is the size of the sandbox's private /tmp (a tmpfs,
	// charged to its memory, of at most DiskBytes) where the sandbox has
	// no disk of its own; with one, /tmp is a directory of its root.
	TmpBytes int64 `json:"tmp_bytes,omitempty"`
	// DiskBytes bounds what the sandbox writes to its root (the overlay's
	// upper dir, /tmp among it) and /dev/shm together: both are
	// directories of one filesystem, the sandbox's disk (see
	// disk_linux.go). A write past it fails (ENOSPC or EDQUOT) inside the
	// sandbox. It does not apply where the caller provides the writable
	// tree (Config.UpperDir, Config.RootDir) or keeps it (KeepUpper):
	// those are host directories.
	DiskBytes int64 `json:"disk_bytes,omitempty"`
}

// DefaultLimits apply where a Config leaves a limit at zero.
var DefaultLimits = Limits{MemoryBytes: 4 << 30, Pids: 1024, TmpBytes: 1 << 30, DiskBytes: 10 << 30}

// shmBytes is the size of the /dev/shm of a sandbox without a disk of its
// own (at most its DiskBytes).
const shmBytes = 64 << 20

func (l Limits) withDefaults() Limits {
	if l.MemoryBytes == 0 {
		l.MemoryBytes = DefaultLimits.MemoryBytes
	}
	if l.Pids == 0 {
		l.Pids = DefaultLimits.Pids
	}
	if l.TmpBytes == 0 {
		l.TmpBytes = DefaultLimits.TmpBytes
	}
	if l.DiskBytes == 0 {
		l.DiskBytes = DefaultLimits.DiskBytes
	}
	return l
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
}

// Validate checks s without touching the sandbox; it reports the first
// problem with enough detail to fix it.
func (s *Config) Validate(rootless bool) error {
	if err := s.validateRoot(); err != nil {
		return err
	}
	return s.validateRest(rootless)
}

// validateRoot checks what the sandbox's root is made of: its layers,
// root dir or host base, and its upper dir.
func (s *Config) validateRoot() error {
	if len(s.Layers) == 0 && !s.HostBase && s.RootDir == "" {
		return invalid("no root: give at least one layer, a root dir or use the host base")
	}
	if s.RootDir != "" {
		if len(s.Layers) > 0 || s.UpperDir != "" {
			return invalid("a root dir (copy mode) excludes layers and an upper dir")
		}
		if err := checkDir("root dir", s.RootDir); err != nil {
			return err
		}
	}
	for _, l := range s.Layers {
		if err := checkDir("layer", l); err != nil {
			return err
		}
	}
	if s.UpperDir != "" {
		if err := checkDir("upper dir", s.UpperDir); err != nil {
			return err
		}
	}
	return nil
}

// validateRest checks the rest of the config: all but the root.
func (s *Config) validateRest(rootless bool) error {
	for _, d := range s.HostDirs {
		if !filepath.IsAbs(d) {
			return invalid("host dir %q is not an absolute path", d)
		}
	}
	for _, b := range s.Binds {
		if !filepath.IsAbs(b.Source) || !filepath.IsAbs(b.Target) {
			return invalid("bind %s:%s: both paths must be absolute", b.Source, b.Target)
		}
		if _, err := os.Stat(b.Source); err != nil {
			return invalid("bind source %s: %v", b.Source, err)
		}
	}
	if s.Sudo != "" && (!filepath.IsAbs(s.Sudo) || filepath.Clean(s.Sudo) == "/") {
		return invalid("sudo path %q is not an absolute path of a file", s.Sudo)
	}
	if s.Workdir != "" && !filepath.IsAbs(s.Workdir) {
		return invalid("workdir %q is not an absolute path", s.Workdir)
	}
	for _, kv := range s.Env {
		if !strings.Contains(kv, "=") || strings.HasPrefix(kv, "=") {
			return invalid("environment entry %q is not NAME=value", kv)
		}
	}
	switch s.Network {
	case "", NetworkNone, NetworkHost, NetworkFiltered:
	default:
		return invalid("network %q: use %q, %q or %q", s.Network, NetworkNone, NetworkHost, NetworkFiltered)
	}
	if s.NetPolicy != nil {
		if s.Network != NetworkFiltered {
			return invalid("a network policy needs network %q, not %q", NetworkFiltered, s.Network)
		}
		if err := s.NetPolicy.check(); err != nil {
			return err
		}
	}
	l := s.Limits
	if l.MemoryBytes < 0 || l.Pids < 0 || l.CPUs < 0 || l.TmpBytes < 0 || l.DiskBytes < 0 {
		return invalid("negative limit in %+v", l)
	}
	if l.DiskBytes != 0 && l.DiskBytes < 1<<20 {
		return invalid("disk limit %d bytes is below the 1 MiB a sandbox needs to start", l.DiskBytes)
	}
	if l.MemoryBytes != 0 && l.MemoryBytes < 8<<20 {
		return invalid("memory limit %d bytes is below the 8 MiB a sandbox needs to start", l.MemoryBytes)
	}
	if l.Pids != 0 && l.Pids < 8 {
		return invalid("pids limit %d is below the 8 a sandbox needs to start", l.Pids)
	}
	if s.User.UID < 0 || s.User.GID < 0 {
		return invalid("negative uid or gid %+v", s.User)
	}
	if rootless && s.User != (User{}) && (s.UpperDir != "" || s.RootDir != "" || s.KeepUpper) {
		return invalid("user %d:%d: a rootless sandbox runs as a user other than root only on a writable layer of its own, "+
			"not on a host directory (UpperDir, RootDir, KeepUpper), which would keep files the caller cannot remove", s.User.UID, s.User.GID)
	}
	if strings.ContainsAny(s.Hostname, "/ \x00") || len(s.Hostname) > 64 {
		return invalid("hostname %q is not a valid host name", s.Hostname)
	}
	return nil
}

func checkDir(what, p string) error {
	if !filepath.IsAbs(p) {
		return invalid("%s %q is not an absolute path", what, p)
	}
	fi, err := os.Stat(p)
	if err != nil {
		return invalid("%s %s: %v", what, p, err)
	}
	if !fi.IsDir() {
		return invalid("%s %s is not a directory", what, p)
	}
	return nil
}
