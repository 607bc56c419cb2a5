package server

import (
	"net/http"
	"strings"
	"time"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/engine"
)

// gymSession is the session of an episode's sandbox.
const gymSession = "gym"

func (s *Server) gymReset(w http.ResponseWriter, r *http.Request) (any, error) {
	var req api.GymResetRequest
	if err := decode(r, &req, false); err != nil {
		return nil, err
	}
	if req.LifetimeNs < 0 || req.IdleTimeoutNs < 0 || req.AdmissionWaitNs < 0 {
		return nil, badRequest("lifetime_ns, idle_timeout_ns and admission_wait_ns must not be negative")
	}
	if err := checkLimits("limits", req.Limits); err != nil {
		return nil, err
	}
	id, err := s.instanceOf(req.InstanceID, req.Instance)
	if err != nil {
		return nil, err
	}
	if id == "" {
		return nil, badRequest("reset needs an instance: instance_id or instance")
	}
	in, err := s.e.Instance(id)
	if err != nil {
		return nil, err
	}
	labels := map[string]string{"gym": "1"}
	for k, v := range req.Labels {
		labels[k] = v
	}
	start := time.Now()
	sb, err := s.e.CreateSandbox(r.Context(), engine.SandboxRequest{InstanceID: id, Labels: labels, Limits: req.Limits,
		Lifetime: time.Duration(req.LifetimeNs), IdleTimeout: time.Duration(req.IdleTimeoutNs), AdmissionWait: s.admissionWait(req.AdmissionWaitNs),
		Session: gymSession})
	if err != nil {
		return nil, err
	}
	s.metrics.created(time.Since(start))
	return api.GymObservation{SandboxID: sb.ID(), InstanceID: id, ProblemStatement: in.ProblemStatement, Cwd: sb.RepoDir(), Session: gymSession}, nil
}

func (s *Server) gymStep(w http.ResponseWriter, r *http.Request) (any, error) {
	var req api.GymStepRequest
	if err := decode(r, &req, false); err != nil {
		return nil, err
	}
	if req.TimeoutNs < 0 {
		return nil, badRequest("timeout_ns %d: must not be negative (0: the server's step timeout)", req.TimeoutNs)
	}
	timeout := time.Duration(req.TimeoutNs)
	if timeout == 0 {
		timeout = s.o.StepTimeout
	}
	sb, err := s.sandbox(r)
	if err != nil {
		return nil, err
	}
	if sb.Info().InstanceID == "" {
		return nil, engine.ErrNoInstance
	}
	start := time.Now()
	res, err := sb.Exec(r.Context(), api.ExecRequest{Session: gymSession, Command: req.Command, TimeoutNs: int64(timeout)})
	if err != nil {
		return nil, err
	}
	s.metrics.exec(true, time.Since(start))
	first, _, _ := strings.Cut(res.Stdout, "\n")
	done := res.SessionEnded || res.ExitCode == 0 && strings.TrimSpace(first) == api.SubmitMarker
	return api.GymStep{Observation: res, Done: done}, nil
}

func (s *Server) gymSubmit(w http.ResponseWriter, r *http.Request) (any, error) {
	var req api.GymSubmitRequest
	if err := decode(r, &req, true); err != nil {
		return nil, err
	}
	sb, err := s.sandbox(r)
	if err != nil {
		return nil, err
	}
	res, _, err := sb.EvaluateRepeat(r.Context(), req.Model, req.Patch, req.Repeat)
	if err != nil {
		return nil, err
	}
	if !req.Keep {
		sb.Close()
	}
	return api.GymSubmitResult{Reward: res.Reward, Outcome: res.Outcome, Done: true, Result: res, Flaky: res.Flaky}, nil
}
