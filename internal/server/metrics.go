package server

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/minisandbox/msb/internal/engine"
)

// metrics are the server's Prometheus metrics: histograms it observes
// itself, and the engine's counts read at each scrape.
type metrics struct {
	reg      *prometheus.Registry
	create   prometheus.Histogram
	execs    *prometheus.HistogramVec
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

func newMetrics(e *engine.Engine) *metrics {
	m := &metrics{reg: prometheus.NewRegistry(),
		create: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "msb_sandbox_create_seconds",
			Help: "Time to create a sandbox through the API, admission and layers included.", Buckets: prometheus.ExponentialBuckets(0.002, 2, 16)}),
		execs: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "msb_exec_seconds",
			Help: "Time of an exec through the API, by kind (oneshot, session).", Buckets: prometheus.ExponentialBuckets(0.0002, 2, 22)}, []string{"kind"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "msb_http_requests_total", Help: "HTTP requests by route and status."}, []string{"route", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "msb_http_request_seconds", Help: "HTTP request time by route.",
			Buckets: prometheus.ExponentialBuckets(0.0002, 2, 22)}, []string{"route"}),
	}
	m.reg.MustRegister(m.create, m.execs, m.requests, m.latency, engineCollector{e},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

func (m *metrics) created(d time.Duration) { m.create.Observe(d.Seconds()) }

func (m *metrics) exec(session bool, d time.Duration) {
	kind := "oneshot"
	if session {
		kind = "session"
	}
	m.execs.WithLabelValues(kind).Observe(d.Seconds())
}

func (m *metrics) request(route string, code int, d time.Duration) {
	m.requests.WithLabelValues(route, strconv.Itoa(code)).Inc()
	m.latency.WithLabelValues(route).Observe(d.Seconds())
}

// lazyDesc is a metric's description made on first use (when the server
// first describes or collects its metrics), so commands that never serve,
// msb run among them, do not make them at start-up.
func lazyDesc(name, help string, labels ...string) func() *prometheus.Desc {
	return sync.OnceValue(func() *prometheus.Desc { return prometheus.NewDesc(name, help, labels, nil) })
}

// engineCollector reports the engine's Stats at each scrape.
type engineCollector struct{ e *engine.Engine }

var (
	descLive      = lazyDesc("msb_sandboxes_live", "Live sandboxes, evaluation sandboxes included.")
	descCreated   = lazyDesc("msb_sandboxes_created_total", "Sandboxes created, by kind (task, raw).", "kind")
	descReaped    = lazyDesc("msb_sandboxes_reaped_total", "Sandboxes closed by the daemon, by reason (lifetime, idle_timeout).", "reason")
	descEvals     = lazyDesc("msb_evaluations_total", "Evaluations (fresh sandboxes), by outcome.", "outcome")
	descBuilds    = lazyDesc("msb_cache_builds_total", "Environment cache builds, by what (env, repo, failed).", "what")
	descHits      = lazyDesc("msb_cache_hits_total", "Task sandboxes whose layers were all cached.")
	descMisses    = lazyDesc("msb_cache_misses_total", "Task sandboxes for which a layer was built.")
	descRejected  = lazyDesc("msb_admission_rejected_total", "Sandboxes refused for lack of room, by resource.", "reason")
	descQuotaUsed = lazyDesc("msb_quota_used", "Reserved now, by resource (sandboxes, memory_bytes, disk_bytes).", "resource")
	descQuotaMax  = lazyDesc("msb_quota_max", "Budget, by resource (0: none).", "resource")
	// The background compaction (serve --compact-unused).
	descCompactRuns    = lazyDesc("msb_cache_compaction_runs_total", "Background cache compactions, by outcome (ok, failed, cancelled: stopped by the shutdown).", "outcome")
	descCompactLayers  = lazyDesc("msb_cache_compacted_layers_total", "Layers the background compaction made cold.")
	descCompactObjects = lazyDesc("msb_cache_compacted_objects_total", "Objects the background compaction compressed.")
	descCompactBytes   = lazyDesc("msb_cache_compacted_bytes_total", "Bytes of disk of the objects the background compaction compressed, by kind (raw: before, compressed: after, freed: trees included).", "kind")
	descCompactLast    = lazyDesc("msb_cache_compaction_last_seconds", "Duration of the last background compaction.")
	descCompactRunning = lazyDesc("msb_cache_compaction_running", "1 while a background compaction runs.")
)

func (engineCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLive(), descCreated(), descReaped(), descEvals(), descBuilds(), descHits(), descMisses(), descRejected(), descQuotaUsed(), descQuotaMax(), descPool(), descPoolUse(), descRefill(), descSession(),
		descCompactRuns(), descCompactLayers(), descCompactObjects(), descCompactBytes(), descCompactLast(), descCompactRunning()} {
		ch <- d
	}
}

func (c engineCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.e.Stats()
	gauge := func(d *prometheus.Desc, v float64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, l...)
	}
	counter := func(d *prometheus.Desc, v int64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), l...)
	}
	gauge(descLive(), float64(st.Live))
	for _, k := range []string{"task", "raw"} {
		counter(descCreated(), st.Created[k], k)
	}
	for k, v := range st.Reaped {
		counter(descReaped(), v, k)
	}
	for k, v := range st.Evaluations {
		counter(descEvals(), v, string(k))
	}
	counter(descBuilds(), st.EnvBuilds, "env")
	counter(descBuilds(), st.RepoBuilds, "repo")
	counter(descBuilds(), st.FailedBuilds, "failed")
	counter(descHits(), st.CacheHits)
	counter(descMisses(), st.CacheMisses)
	for k, v := range st.Rejected {
		counter(descRejected(), v, k)
	}
	collectPool(ch, c.e, gauge, counter)
	cs := c.e.CompactionStats()
	counter(descCompactRuns(), cs.Runs-cs.Errors, "ok")
	counter(descCompactRuns(), cs.Errors, "failed")
	counter(descCompactRuns(), cs.Cancelled, "cancelled")
	counter(descCompactLayers(), cs.Layers)
	counter(descCompactObjects(), cs.Objects)
	counter(descCompactBytes(), cs.RawBytes, "raw")
	counter(descCompactBytes(), cs.CompressedBytes, "compressed")
	counter(descCompactBytes(), cs.FreedBytes, "freed")
	gauge(descCompactLast(), cs.LastDuration.Seconds())
	running := 0.0
	if cs.Running {
		running = 1
	}
	gauge(descCompactRunning(), running)
	q := c.e.Quota()
	gauge(descQuotaUsed(), float64(q.Sandboxes), "sandboxes")
	gauge(descQuotaUsed(), float64(q.MemoryUsedBytes), "memory_bytes")
	gauge(descQuotaUsed(), float64(q.DiskUsedBytes), "disk_bytes")
	gauge(descQuotaMax(), float64(q.MaxSandboxes), "sandboxes")
	gauge(descQuotaMax(), float64(q.MemoryBytes), "memory_bytes")
	gauge(descQuotaMax(), float64(q.DiskBytes), "disk_bytes")
}
