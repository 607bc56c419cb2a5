package server

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/minisandbox/msb/internal/engine"
)

// collectPool reports the engine's snapshot pool (engine.PoolStats).
func collectPool(ch chan<- prometheus.Metric, st engine.PoolStats, gauge func(*prometheus.Desc, float64, ...string), counter func(*prometheus.Desc, int64, ...string)) {
	gauge(descPool, float64(st.Ready), "ready")
	gauge(descPool, float64(st.Making), "making")
	counter(descPoolUse, st.Hits, "hit")
	counter(descPoolUse, st.Misses, "miss")
	counter(descPoolUse, st.Made, "made")
	counter(descPoolUse, st.Failed, "failed")
	ch <- prometheus.MustNewConstSummary(descRefill, uint64(st.Refills), st.RefillTime.Seconds(), nil)
}
