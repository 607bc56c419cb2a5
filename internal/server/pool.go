package server

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/minisandbox/msb/internal/engine"
)

var (
	descPool    = lazyDesc("msb_pool_spares", "Sandboxes started ahead in the warm pool (--spares), by kind of environment (instance, image, snapshot) and state (ready, making).", "kind", "state")
	descPoolUse = lazyDesc("msb_pool_total", "What the warm pool did, by kind of environment and event: hit (a create or fork took a spare), miss (it found none), made, failed (a start failed or found no room), evicted (for another key's), expired (--spare-idle), shed (its room given to a create).", "kind", "event")
	descRefill  = lazyDesc("msb_pool_refill_seconds", "The warm pool's refills, by kind of environment: from the create or fork that asked to the last spare ready.", "kind")
	descSession = lazyDesc("msb_pool_sessions_total", "Clients' first sessions that were a spare's shell started ahead (renamed, not started).")
)

// collectPool reports the engine's warm pool (engine.PoolStats), every
// kind of it even before use.
func collectPool(ch chan<- prometheus.Metric, e *engine.Engine, gauge func(*prometheus.Desc, float64, ...string), counter func(*prometheus.Desc, int64, ...string)) {
	by := e.PoolStats()
	for _, kind := range []string{engine.PoolInstance, engine.PoolImage, engine.PoolSnapshot} {
		st := by[kind]
		gauge(descPool(), float64(st.Spares), kind, "ready")
		gauge(descPool(), float64(st.Making), kind, "making")
		for _, ev := range []struct {
			name string
			v    int64
		}{{"hit", st.Hits}, {"miss", st.Misses}, {"made", st.Made}, {"failed", st.Failed}, {"evicted", st.Evicted}, {"expired", st.Expired}, {"shed", st.Shed}} {
			counter(descPoolUse(), ev.v, kind, ev.name)
		}
		ch <- prometheus.MustNewConstSummary(descRefill(), uint64(st.Refills), st.RefillTime.Seconds(), nil, kind)
	}
	counter(descSession(), e.Stats().SpareSessions)
}
