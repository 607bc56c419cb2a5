package cli

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/minisandbox/msb/internal/engine/host"
)

// specFlags are the flags that describe a sandbox, shared by run and shell.
type specFlags struct {
	root     string
	layers   []string
	hostBase bool
	rw, ro   []string
	workdir  string
	env      []string
	hostname string
	network  string
	memory   string
	pids     int64
	cpus     float64
	tmp      string
	disk     string
	keep     bool
	image    string // msb run's --image (cmd_image.go)
	fs       *pflag.FlagSet
}

func (f *specFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.root, "root", "", "a root filesystem tree (e.g. a debootstrap dir) as the sandbox's read-only base")
	fs.StringArrayVar(&f.layers, "layer", nil, "a read-only layer dir over the base, bottom first (repeatable)")
	fs.BoolVar(&f.hostBase, "host-base", false, "bind the host's /usr, /bin, /lib*, /etc read-only (the default without --root)")
	fs.StringArrayVar(&f.rw, "rw", nil, "bind a host path read-write at the same path, or SRC:DST (repeatable)")
	fs.StringArrayVar(&f.ro, "ro", nil, "bind a host path read-only at the same path, or SRC:DST (repeatable)")
	fs.StringVarP(&f.workdir, "workdir", "w", "", "working directory inside the sandbox")
	fs.StringArrayVarP(&f.env, "env", "e", nil, "environment variable NAME=value (repeatable)")
	fs.StringVar(&f.hostname, "hostname", "", "host name inside the sandbox")
	fs.StringVar(&f.network, "network", host.NetworkNone, "none (no route out), host, or filtered (a way out through slirp4netns, under --allow and --deny)")
	fs.StringVar(&f.memory, "memory", "", "memory limit, e.g. 512M or 4G (default 4G)")
	fs.Int64Var(&f.pids, "pids", 0, "process limit (default 1024)")
	fs.Float64Var(&f.cpus, "cpus", 0, "CPU limit in cores, e.g. 1.5 (default none)")
	fs.StringVar(&f.tmp, "tmp", "", "size of /tmp where no disk holds it (a tmpfs; with a disk /tmp is a directory of the root), e.g. 256M (default 1G)")
	fs.StringVar(&f.disk, "disk", "", "limit on what the sandbox writes (its root, /tmp, /dev/shm), e.g. 2G (default 10G)")
	fs.BoolVar(&f.keep, "keep-upper", false, "keep the sandbox's writable layer after it exits, for debugging")
	f.fs = fs
}

func (f *specFlags) spec() (host.SandboxConfig, error) {
	s := host.SandboxConfig{
		Layers: f.layers, HostBase: f.hostBase, Workdir: f.workdir, Env: f.env,
		Hostname: f.hostname, Network: f.network, KeepUpper: f.keep,
	}
	if f.root != "" {
		s.Layers = append([]string{f.root}, s.Layers...)
	} else {
		s.HostBase = true
	}
	for _, list := range []struct {
		specs []string
		ro    bool
	}{{f.rw, false}, {f.ro, true}} {
		for _, b := range list.specs {
			src, dst, ok := strings.Cut(b, ":")
			if !ok {
				dst = src
			}
			s.Binds = append(s.Binds, host.Bind{Source: src, Target: dst, ReadOnly: list.ro})
		}
	}
	var err error
	if s.Limits.MemoryBytes, err = parseBytes(f.memory); err != nil {
		return s, fmt.Errorf("--memory: %w", err)
	}
	if s.Limits.TmpBytes, err = parseBytes(f.tmp); err != nil {
		return s, fmt.Errorf("--tmp: %w", err)
	}
	if s.Limits.DiskBytes, err = parseBytes(f.disk); err != nil {
		return s, fmt.Errorf("--disk: %w", err)
	}
	s.Limits.Pids, s.Limits.CPUs = f.pids, f.cpus
	return s, f.checkLimits(s.Limits)
}

// parseBytes reads sizes like 512, 64K, 512M, 4G (powers of 1024).
func parseBytes(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	mult := int64(1)
	switch strings.ToUpper(s[len(s)-1:]) {
	case "K":
		mult = 1 << 10
	case "M":
		mult = 1 << 20
	case "G":
		mult = 1 << 30
	case "T":
		mult = 1 << 40
	}
	num := s
	if mult > 1 {
		num = s[:len(s)-1]
	}
	n, err := strconv.ParseFloat(num, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not a size like 512M or 4G", s)
	}
	return int64(n * float64(mult)), nil
}

// checkLimits refuses limits given explicitly as 0 (which would silently
// mean "the default") and a CPU limit the host cannot give.
func (f *specFlags) checkLimits(l host.SandboxLimits) error {
	for _, c := range []struct {
		name string
		zero bool
	}{{"memory", l.MemoryBytes == 0}, {"tmp", l.TmpBytes == 0}, {"pids", l.Pids == 0}, {"cpus", l.CPUs == 0}} {
		if c.zero && f.fs != nil && f.fs.Changed(c.name) {
			return fmt.Errorf("--%s 0: give a positive value (leave the flag out for the default)", c.name)
		}
	}
	if l.CPUs < 0 || l.CPUs > float64(runtime.NumCPU()) {
		return fmt.Errorf("--cpus %g: this host has %d CPUs", l.CPUs, runtime.NumCPU())
	}
	if l.Pids < 0 {
		return fmt.Errorf("--pids %d: give a positive number", l.Pids)
	}
	return nil
}

// sizeFlag parses a size flag; one given explicitly must be positive.
func sizeFlag(fs *pflag.FlagSet, name, v string) (int64, error) {
	n, err := parseBytes(v)
	if err != nil {
		return 0, fmt.Errorf("%w: --%s: %v", errUsage, name, err)
	}
	if n == 0 && fs != nil && fs.Changed(name) {
		return 0, fmt.Errorf("%w: --%s 0: give a size like 512M or 4G (leave the flag out for the default)", errUsage, name)
	}
	return n, nil
}

func keyValues(list []string, flag string) (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range list {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" || v == "" {
			return nil, fmt.Errorf("%w: %s %q: want KEY=VALUE", errUsage, flag, kv)
		}
		out[k] = v
	}
	return out, nil
}
