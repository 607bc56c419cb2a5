package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/envcache"
)

// Build phases, in the order they happen.
var BuildPhases = []string{envcache.PhaseMirror, envcache.PhaseCheckout, envcache.PhaseEnvBuild, envcache.PhaseInstall, envcache.PhaseCommit}

// BuildEvent is one step of a build: a phase of an instance starting or
// ending, or (Finished set) an instance done.
type BuildEvent struct {
	InstanceID string
	Phase      string // one of BuildPhases; empty with Finished
	PhaseDone  bool
	Elapsed    time.Duration // the phase's time, when PhaseDone
	Finished   *api.BuildResult
}

// buildEvent is the cache's event as a BuildEvent.
func buildEvent(ev envcache.Event) BuildEvent {
	return BuildEvent{InstanceID: ev.Instance, Phase: ev.Phase, PhaseDone: ev.Done, Elapsed: ev.Elapsed}
}

// BuildRun builds the layers of instances.
type BuildRun struct {
	InstanceIDs []string
	Workers     int
	SkippedRows int
	// Events, when set, receives every BuildEvent; it must be safe for
	// concurrent calls.
	Events func(BuildEvent)
}

// Build makes sure the environment, repository and install layers of every
// instance exist, building each at most once, with up to Workers instances at once.
// An interrupted build reports the instances it did not get to as
// interrupted and returns the context's error.
func (e *Engine) Build(ctx context.Context, r BuildRun) (api.BuildReport, error) {
	rep := api.BuildReport{Instances: make([]api.BuildResult, len(r.InstanceIDs)), SkippedRows: r.SkippedRows}
	for _, id := range r.InstanceIDs {
		if _, err := e.task(id); err != nil {
			return rep, fmt.Errorf("%w: %w", ErrBadRequest, err)
		}
	}
	emit := func(ev BuildEvent) {
		if r.Events != nil {
			r.Events(ev)
		}
	}
	progress := func(ev envcache.Event) {
		emit(buildEvent(ev))
	}
	g := new(errgroup.Group)
	g.SetLimit(max(r.Workers, 1))
	for i, id := range r.InstanceIDs {
		rep.Instances[i] = api.BuildResult{InstanceID: id, Status: api.BuildInterrupted}
		if ctx.Err() != nil {
			continue
		}
		g.Go(func() error {
			if ctx.Err() != nil {
				return nil
			}
			res := e.buildOne(ctx, id, progress)
			rep.Instances[i] = res
			emit(BuildEvent{InstanceID: id, Finished: &res})
			return nil
		})
	}
	g.Wait()
	for _, res := range rep.Instances {
		switch res.Status {
		case api.BuildBuilt:
			rep.Built++
		case api.BuildReused:
			rep.Reused++
		case api.BuildFailed:
			rep.Failed++
		case api.BuildInterrupted:
			rep.Interrupted++
		}
	}
	s := e.cache.c.Stats()
	rep.EnvBuilds, rep.InstallBuilds, rep.RepoBuilds = s.EnvBuilds, s.InstallBuilds, s.RepoBuilds
	if err := ctx.Err(); err != nil {
		return rep, fmt.Errorf("interrupted with %d of %d instances not built (run the same command again to go on; what was built is kept): %w",
			rep.Interrupted, len(r.InstanceIDs), err)
	}
	return rep, nil
}

func (e *Engine) buildOne(ctx context.Context, id string, progress envcache.Progress) api.BuildResult {
	r := api.BuildResult{InstanceID: id}
	t, err := e.task(id)
	if err == nil {
		var p *envcache.Prepared
		if p, err = e.cache.c.Prepare(ctx, t.Instance, t.Spec, progress); err == nil {
			err = p.Release()
			r.Status, r.EnvKey, r.InstallKey = api.BuildBuilt, p.EnvKey, p.InstallKey
			if p.Reused {
				r.Status = api.BuildReused
			}
			r.Timings = api.BuildPhases{Mirror: int64(p.Timings[envcache.PhaseMirror]), Checkout: int64(p.Timings[envcache.PhaseCheckout]),
				EnvBuild: int64(p.Timings[envcache.PhaseEnvBuild]), Install: int64(p.Timings[envcache.PhaseInstall]), Commit: int64(p.Timings[envcache.PhaseCommit]), Copy: int64(p.Timings["copy"])}
			if err == nil {
				return r
			}
		}
	}
	if ctx.Err() != nil { // cut short: git or pip killed, not a real failure

		r.Status = api.BuildInterrupted
		return r
	}
	r.Status, r.Error = api.BuildFailed, err.Error()
	if errors.Is(err, envcache.ErrRepo) && t != nil {
		r.Error = fmt.Sprintf("%s (tell msb where %s is: --repo-source %s=PATH_OR_URL)", r.Error, t.Instance.Repo, t.Instance.Repo)
	}
	var be *envcache.BuildError
	if errors.As(err, &be) {
		r.Error, r.Log = be.Reason, be.Log
		if be.Kind == envcache.KindInstall {
			r.InstallKey = be.Key
		} else {
			r.EnvKey = be.Key
		}
		if be.Recorded {
			r.Error += " (recorded earlier; --retry-failed to build again)"
		}
		if tail := strings.TrimSpace(be.Tail); tail != "" {
			r.Error += "\n" + tail
		}
	}
	return r
}
