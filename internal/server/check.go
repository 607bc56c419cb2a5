package server

import (
	"fmt"
	"os"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/dataset"
)

// Bounds of a request's limits checked at the API boundary, where the
// error can name the field (below, a cgroup write refuses them as EINVAL
// as root, and rootless nothing refuses them).
const (
	// minPids is the fewest processes a sandbox works with (its init,
	// bash, a command and what it forks).
	minPids = 8
	// maxPids is the kernel's PID_MAX_LIMIT: no pids.max can exceed it.
	maxPids = 1 << 22
	// minMemory is the smallest memory a sandbox starts in.
	minMemory = 8 << 20
	// maxCPUs is the kernel's largest NR_CPUS.
	maxCPUs = 8192
)

// checkLimits names the first field of l (at field, "limits") out of
// bounds; zero is the engine's default.
func checkLimits(field string, l api.Limits) error {
	switch {
	case l.Pids != 0 && (l.Pids < minPids || l.Pids > maxPids):
		return badRequest("%s.pids %d: 0 (the default) or from %d to %d", field, l.Pids, minPids, maxPids)
	case l.MemoryBytes != 0 && l.MemoryBytes < minMemory:
		return badRequest("%s.memory_bytes %d: 0 (the default) or at least %d", field, l.MemoryBytes, minMemory)
	case l.MemoryBytes < 0:
		return badRequest("%s.memory_bytes %d: must not be negative", field, l.MemoryBytes)
	case l.CPUs < 0 || l.CPUs > maxCPUs || l.CPUs != l.CPUs:
		return badRequest("%s.cpus %g: 0 (the default) or up to %d", field, l.CPUs, maxCPUs)
	case l.TmpBytes < 0:
		return badRequest("%s.tmp_bytes %d: must not be negative", field, l.TmpBytes)
	case l.DiskBytes < 0:
		return badRequest("%s.disk_bytes %d: must not be negative", field, l.DiskBytes)
	}
	return nil
}

// checkDatasetFile says why the daemon cannot read the dataset file at p,
// naming the field: a file that is missing is a 404, anything but a
// regular file it can open (a directory, a FIFO that would block) a 400.
func checkDatasetFile(p string) error {
	fi, err := os.Stat(p)
	switch {
	case os.IsNotExist(err):
		return fmt.Errorf("path %q: %w", p, err)
	case err != nil:
		return badRequest("path %q: the daemon cannot read it: %v", p, err)
	case !fi.Mode().IsRegular():
		return badRequest("path %q: not a regular file (%s)", p, fi.Mode().Type())
	}
	f, err := os.Open(p)
	if err != nil {
		return badRequest("path %q: the daemon (uid %d) cannot read it: %v", p, os.Geteuid(), err)
	}
	return f.Close()
}

// checkPredictions names the first prediction whose model cannot name a
// directory of the harness's files, or whose instance is predicted twice.
func checkPredictions(preds []api.Prediction) error {
	seen := map[string]bool{}
	for i, p := range preds {
		if err := api.CheckName("model", dataset.ModelDir(p.Model)); err != nil {
			return badRequest("predictions[%d].model_name_or_path %q: %v", i, p.Model, err)
		}
		if seen[p.InstanceID] {
			return badRequest("predictions[%d].instance_id %q: the instance is predicted twice", i, p.InstanceID)
		}
		seen[p.InstanceID] = true
	}
	return nil
}
