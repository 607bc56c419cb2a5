package server

import (
	"net/http"
	"time"

	"github.com/minisandbox/msb/internal/api"
)

// snapshotRoutes are the routes of snapshots, forks and rollbacks: a live
// sandbox's writes become a named layer, new sandboxes start from one, and
// a sandbox returns to one in place.
func (s *Server) snapshotRoutes() []route {
	return []route{
		{method: "POST", path: "/v1/sandboxes/{id}/snapshot", op: "snapshotSandbox", tag: "snapshots", summary: "freeze the sandbox, keep what it wrote as an immutable layer (named, or anonymous with no name) with its sessions' cwd and environment, and thaw it",
			req: api.SnapshotRequest{}, resp: api.SnapshotInfo{}, status: 201, errors: []int{404, 409, 410, 429, 507}, h: s.snapshot},
		{method: "GET", path: "/v1/snapshots", op: "listSnapshots", tag: "snapshots", summary: "the named snapshots, oldest first",
			resp: api.SnapshotList{}, status: 200, h: s.listSnapshots},
		{method: "DELETE", path: "/v1/snapshots/{name}", op: "deleteSnapshot", tag: "snapshots", summary: "drop a snapshot's name (its layer stays while a sandbox uses it; gc removes it after)",
			status: 204, errors: []int{404}, h: s.deleteSnapshot},
		{method: "POST", path: "/v1/sandboxes/{id}/fork", op: "forkSandbox", tag: "snapshots", summary: "start count new sandboxes from a snapshot of the sandbox (default: its live state), with its limits, labels, network and sessions' cwd and environment",
			req: api.ForkRequest{}, resp: api.SandboxList{}, status: 201, errors: []int{404, 409, 410, 429, 507}, h: s.fork},
		{method: "POST", path: "/v1/snapshots/{name}/fork", op: "forkSnapshot", tag: "snapshots", summary: "start count new sandboxes from a named snapshot, also once the sandbox it was taken of is closed",
			req: api.ForkRequest{}, resp: api.SandboxList{}, status: 201, errors: []int{404, 409, 429, 507}, h: s.forkSnapshot},
		{method: "POST", path: "/v1/sandboxes/{id}/rollback", op: "rollbackSandbox", tag: "snapshots", summary: "reset the sandbox in place (same id) to a snapshot, or to its state at creation; its processes are killed and its sessions restarted",
			req: api.RollbackRequest{}, resp: api.SandboxInfo{}, status: 200, errors: []int{404, 409, 410}, h: s.rollback},
	}
}

func (s *Server) snapshot(w http.ResponseWriter, r *http.Request) (any, error) {
	var req api.SnapshotRequest
	if err := decode(r, &req, true); err != nil {
		return nil, err
	}
	start := time.Now()
	var info api.SnapshotInfo
	var err error
	switch req.Processes {
	case "", api.ForkProcessesNone:
		info, err = s.e.Snapshot(r.Context(), r.PathValue("id"), req)
	case api.ForkProcessesAll:
		info, err = s.e.SnapshotProcesses(r.Context(), r.PathValue("id"), req)
	default:
		err = badRequest("processes %q: give %q (the default) or %q", req.Processes, api.ForkProcessesNone, api.ForkProcessesAll)
	}
	if err != nil {
		return nil, err
	}
	s.log.Info("snapshot taken", "request_id", requestID(r), "sandbox", info.Sandbox, "snapshot", info.Name, "layer", info.Layer,
		"bytes", info.Bytes, "took", time.Since(start))
	return info, nil
}

func (s *Server) listSnapshots(w http.ResponseWriter, r *http.Request) (any, error) {
	list, err := s.e.Snapshots()
	if err != nil {
		return nil, err
	}
	return api.SnapshotList{Snapshots: list}, nil
}

func (s *Server) deleteSnapshot(w http.ResponseWriter, r *http.Request) (any, error) {
	if err := s.e.DeleteSnapshot(r.PathValue("name")); err != nil {
		return nil, err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil, nil
}

func (s *Server) fork(w http.ResponseWriter, r *http.Request) (any, error) {
	var req api.ForkRequest
	if err := decode(r, &req, true); err != nil {
		return nil, err
	}
	return s.forkFrom(r, r.PathValue("id"), req)
}

func (s *Server) forkSnapshot(w http.ResponseWriter, r *http.Request) (any, error) {
	var req api.ForkRequest
	if err := decode(r, &req, true); err != nil {
		return nil, err
	}
	name := r.PathValue("name")
	if req.Snapshot != "" && req.Snapshot != name {
		return nil, badRequest("the body names snapshot %q and the path %q", req.Snapshot, name)
	}
	req.Snapshot = name
	return s.forkFrom(r, "", req)
}

// forkFrom forks sandbox id (empty: the snapshot alone) and describes the
// children; the engine checks the request (count, processes, labels).
func (s *Server) forkFrom(r *http.Request, id string, req api.ForkRequest) (any, error) {
	start := time.Now()
	children, err := s.e.Fork(r.Context(), id, req)
	if err != nil {
		return nil, err
	}
	out := api.SandboxList{Sandboxes: make([]api.SandboxInfo, 0, len(children))}
	for _, c := range children {
		out.Sandboxes = append(out.Sandboxes, c.Info())
		s.metrics.created(time.Since(start))
	}
	s.log.Info("sandbox forked", "request_id", requestID(r), "sandbox", id, "snapshot", req.Snapshot, "children", len(children), "took", time.Since(start))
	return out, nil
}

func (s *Server) rollback(w http.ResponseWriter, r *http.Request) (any, error) {
	var req api.RollbackRequest
	if err := decode(r, &req, true); err != nil {
		return nil, err
	}
	return s.e.Rollback(r.Context(), r.PathValue("id"), req)
}
