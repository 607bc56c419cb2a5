package checkpoint

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/minisandbox/msb/internal/sandbox"
)

// This file is the seam between the two packages: package sandbox makes a
// restored sandbox's state dir, disk, cgroups and root and knows no dump
// (sandbox.Runtime.Restore takes a sandbox.Restorer); this package, above
// it, dumps a managed sandbox and gives the Restorer that restores the
// dump over what Restore made.

// CheckDumpable says whether sb's processes can be dumped, without
// freezing anything: ErrControlOutside when its control socket lies in
// another network namespace than it (see DumpOptions).
func CheckDumpable(sb *sandbox.Sandbox) error {
	return sameNetns(sb.InitPid(), 3)
}

// CheckSockets says whether c can dump the sockets the processes of sb
// hold: ErrInetSockets naming one it cannot. It freezes nothing; a socket
// opened after it fails the dump with criu's own error.
func (c *Criu) CheckSockets(sb *sandbox.Sandbox) error {
	return c.checkSockets(sb.InitPid())
}

// DumpSandbox dumps sb's processes to dir, leaving them running: with sb
// frozen (sandbox.Sandbox.Freeze), they stay frozen as they were, and
// what the dump holds is the state the caller reads from sb's files in
// the same freeze (a fork's snapshot of its writes). The manifest records
// sb's id and disk, which the Restorer maps to the new sandbox's.
func (c *Criu) DumpSandbox(ctx context.Context, sb *sandbox.Sandbox, dir string) (*Manifest, error) {
	return c.Dump(ctx, DumpOptions{Init: sb.InitPid(), Dir: dir, LeaveRunning: true, Sandbox: sb.ID, Disk: sb.DiskPath(),
		FreezeCgroup: sb.FreezerDir()})
}

// ReadManifest reads the manifest of the dump in dir.
func ReadManifest(dir string) (*Manifest, error) {
	b, err := os.ReadFile(filepath.Join(dir, ManifestName))
	if err != nil {
		return nil, fmt.Errorf("reading the dump's manifest: %w", err)
	}
	var man Manifest
	if err := json.Unmarshal(b, &man); err != nil {
		return nil, fmt.Errorf("reading %s: %w", filepath.Join(dir, ManifestName), err)
	}
	return &man, nil
}

// Restorer restores the dump in dir (of DumpSandbox) over a sandbox that
// sandbox.Runtime.Restore makes: into its cgroups (the dumped sandbox's
// groups, named by its id, become the new one's), with its disk's shm
// dir at /dev/shm, and with the files the dumped processes held on the
// dumped sandbox's disk (a tmpfs disk's root, which init keeps open)
// opened on the new one's. One dump restores into any number of sandboxes.
func (c *Criu) Restorer(dir string) (sandbox.Restorer, error) {
	man, err := ReadManifest(dir)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, t sandbox.RestoreTarget) (*os.Process, error) {
		opts := RestoreOptions{Dir: dir, Root: t.Root, Mounts: map[string]string{}, Idmap: t.Idmap,
			CgroupRoots: map[string]string{}, Files: map[string]string{}, Netns: t.Netns, Control: t.Control}
		if t.Shm != "" {
			opts.Mounts["/dev/shm"] = t.Shm
		}
		for h, p := range man.Cgroups {
			if man.Sandbox != "" && path.Base(p) == man.Sandbox {
				opts.CgroupRoots[h] = path.Join(path.Dir(p), t.ID)
			}
		}
		for _, f := range man.Files {
			switch rel, ok := under(f.Path, man.Disk); {
			case f.Path == "" && t.Disk != "":
				opts.Files[f.ID] = t.Disk // a tmpfs disk's root
			case man.Disk != "" && ok && t.Disk != "":
				opts.Files[f.ID] = filepath.Join(t.Disk, rel)
			case man.Sandbox != "" && strings.HasPrefix(f.Path, "/sys/fs/cgroup/") && strings.Contains(f.Path+"/", "/"+man.Sandbox+"/"):
				// A file of the dumped sandbox's cgroup (Go's runtime
				// keeps its CPU limit's open): the new group's.
				opts.Files[f.ID] = strings.Replace(f.Path, "/"+man.Sandbox, "/"+t.ID, 1)
			}
		}
		r, err := c.Restore(ctx, opts)
		if err != nil {
			return nil, err
		}
		return r.Process, nil
	}, nil
}
