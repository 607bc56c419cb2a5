package server

import (
	"net/http"
	"time"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/engine"
)

// createBatch answers a create with a count: count sandboxes of req, all
// or none, described as a SandboxList (the engine checks the count).
func (s *Server) createBatch(r *http.Request, req engine.SandboxRequest, count int) (any, error) {
	start := time.Now()
	made, err := s.e.CreateSandboxes(r.Context(), req, count)
	if err != nil {
		return nil, err
	}
	took := time.Since(start)
	out := api.SandboxList{Sandboxes: make([]api.SandboxInfo, 0, len(made))}
	for _, sb := range made {
		out.Sandboxes = append(out.Sandboxes, sb.Info())
		s.metrics.created(took)
	}
	s.log.Info("sandboxes created", "request_id", requestID(r), "count", len(made), "instance", req.InstanceID, "took", took)
	return out, nil
}
