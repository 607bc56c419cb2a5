package e2b

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/minisandbox/msb/internal/engine"
)

// clockTick is the unit of /proc/<pid>/stat's CPU times (USER_HZ, 100 on
// every Linux architecture msb runs on).
const clockTick = 10 * time.Millisecond

const (
	sampleEvery = 5 * time.Second // how often a running sandbox's figures are taken, as E2B does
	maxSamples  = 720             // an hour of them; older ones are dropped
	freshSample = time.Second     // a metrics call takes a new sample when the last is older
)

// metric is one sample of a sandbox's figures, as E2B's SandboxMetric
// carries them: CPU from its cgroup (the share of its CPUs used since the
// last sample), memory from its cgroup (both from its processes in /proc
// where the cgroup keeps none), disk from the filesystem that holds what
// it writes.
type metric struct {
	Timestamp     string  `json:"timestamp"`
	TimestampUnix int64   `json:"timestampUnix"`
	CPUCount      int     `json:"cpuCount"`
	CPUUsedPct    float64 `json:"cpuUsedPct"`
	MemUsed       int64   `json:"memUsed"`
	MemTotal      int64   `json:"memTotal"`
	MemCache      int64   `json:"memCache"`
	DiskUsed      int64   `json:"diskUsed"`
	DiskTotal     int64   `json:"diskTotal"`

	at  time.Time
	cpu uint64 // the cgroup's CPU time then, in nanoseconds
}

// sampler takes b's figures every sampleEvery until b is closed.
func (f *Front) sampler(b *box) {
	tick := time.NewTicker(sampleEvery)
	defer tick.Stop()
	for {
		select {
		case <-b.closed:
			return
		case <-tick.C:
			if _, err := f.sample(b); err != nil {
				f.live(b.id) // forgets (and so stops sampling) a sandbox the engine closed
			}
		}
	}
}

// sample takes b's figures now and keeps them; a paused sandbox has none.
func (f *Front) sample(b *box) (metric, error) {
	sid, paused := b.engineID()
	if paused {
		return metric{}, fmt.Errorf("sandbox %s is paused: %w", b.id, engine.ErrGone)
	}
	sb, err := f.e.Sandbox(sid)
	if err != nil {
		return metric{}, err
	}
	m := figures(sb)
	b.mu.Lock()
	defer b.mu.Unlock()
	prev := metric{at: b.started}
	if n := len(b.samples); n > 0 {
		prev = b.samples[n-1]
	}
	// A resumed sandbox is a new cgroup, whose count starts again: its
	// first sample says 0%.
	if dt := m.at.Sub(prev.at); dt > 0 && m.cpu >= prev.cpu {
		pct := float64(m.cpu-prev.cpu) / float64(dt) / float64(m.CPUCount) * 100
		m.CPUUsedPct = math.Round(min(pct, 100)*100) / 100
	}
	if len(b.samples) == maxSamples {
		b.samples = b.samples[1:]
	}
	b.samples = append(b.samples, m)
	return m, nil
}

// figures reads a running sandbox's figures (CPU use aside, which takes
// two samples): zero where msb has none (no cgroup when rootless without
// delegation).
func figures(sb *engine.Sandbox) metric {
	now := time.Now()
	m := metric{Timestamp: now.UTC().Format(time.RFC3339Nano), TimestampUnix: now.Unix(), at: now,
		CPUCount: runtime.NumCPU(), MemTotal: hostMemory()}
	lim := sb.Info().Limits
	if lim.CPUs > 0 {
		m.CPUCount = max(1, int(math.Ceil(lim.CPUs)))
	}
	if lim.MemoryBytes > 0 {
		m.MemTotal = lim.MemoryBytes
	}
	u, err := sb.Usage()
	m.MemUsed, m.cpu = u.MemoryBytes, u.CPUNanos
	if err != nil || m.cpu == 0 { // no cgroup (rootless), or one without CPU accounting (v1 without cpuacct)
		cpu, rss := processTree(sb.InitPid())
		m.cpu = cpu
		if err != nil {
			m.MemUsed = rss
		}
	}
	var st unix.Statfs_t
	if unix.Statfs(fmt.Sprintf("/proc/%d/root", sb.InitPid()), &st) == nil {
		m.DiskTotal = int64(st.Blocks) * st.Bsize
		m.DiskUsed = int64(st.Blocks-st.Bfree) * st.Bsize
	}
	if lim.DiskBytes > 0 && (m.DiskTotal == 0 || lim.DiskBytes < m.DiskTotal) {
		m.DiskTotal = lim.DiskBytes
	}
	return m
}

func hostMemory() int64 {
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) != nil {
		return 0
	}
	return int64(si.Totalram) * int64(si.Unit)
}

// latest is b's newest sample, taken now when the last is older than
// freshSample.
func (f *Front) latest(b *box) (metric, error) {
	b.mu.Lock()
	n := len(b.samples)
	var last metric
	if n > 0 {
		last = b.samples[n-1]
	}
	b.mu.Unlock()
	if n > 0 && time.Since(last.at) < freshSample {
		return last, nil
	}
	return f.sample(b)
}

// metrics answers GET /sandboxes/{id}/metrics: the samples taken between
// start and end (unix seconds, both optional), newest last; a running
// sandbox's list ends with a sample of now.
func (f *Front) metrics(w http.ResponseWriter, r *http.Request) {
	b := f.live(r.PathValue("id"))
	if b == nil {
		notFound(w, r.PathValue("id"))
		return
	}
	from, to, err := timeRange(r)
	if err != nil {
		engineError(w, err)
		return
	}
	if _, err := f.latest(b); err != nil && !errors.Is(err, engine.ErrGone) {
		engineError(w, err)
		return
	}
	b.mu.Lock()
	out := []metric{}
	for _, m := range b.samples {
		if !m.at.Before(from) && (to.IsZero() || !m.at.After(to)) {
			out = append(out, m)
		}
	}
	b.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

// timeRange reads a request's start and end (unix seconds).
func timeRange(r *http.Request) (from, to time.Time, err error) {
	for _, p := range []struct {
		name string
		t    *time.Time
	}{{"start", &from}, {"end", &to}} {
		if s := r.URL.Query().Get(p.name); s != "" {
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return from, to, fmt.Errorf("%w: %s %q is not unix seconds", engine.ErrBadRequest, p.name, s)
			}
			*p.t = time.Unix(n, 0)
		}
	}
	if !to.IsZero() {
		to = to.Add(time.Second - 1) // end names a whole second
	}
	return from, to, nil
}

// manyMetrics answers GET /sandboxes/metrics?sandbox_ids=a,b: each running
// sandbox's latest sample by id; unknown and paused ones are left out.
func (f *Front) manyMetrics(w http.ResponseWriter, r *http.Request) {
	out := map[string]metric{}
	for _, ids := range r.URL.Query()["sandbox_ids"] {
		for id := range strings.SplitSeq(ids, ",") {
			b := f.running(id)
			if b == nil {
				continue
			}
			m, err := f.latest(b)
			if err != nil {
				continue // closed meanwhile
			}
			out[id] = m
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"sandboxes": out})
}

// processTree is the CPU time, in nanoseconds, and the resident memory,
// in bytes, of the process tree under pid. The CPU time is each live
// process's own and that of the children it reaped, so an ended process
// counts once, in its reaper's; pages that processes share count in each.
func processTree(pid int) (cpu uint64, rss int64) {
	var ticks uint64
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		if err != nil {
			continue // ended meanwhile
		}
		_, rest, _ := bytes.Cut(stat, []byte(") "))
		f := strings.Fields(string(rest))
		for _, i := range []int{11, 12, 13, 14} { // utime, stime, cutime, cstime
			if i < len(f) {
				n, _ := strconv.ParseUint(f[i], 10, 64)
				ticks += n
			}
		}
		if len(f) > 21 { // rss, in pages
			n, _ := strconv.ParseInt(f[21], 10, 64)
			rss += n * int64(os.Getpagesize())
		}
		tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", p))
		for _, t := range tasks {
			kids, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", p, t.Name()))
			for k := range strings.FieldsSeq(string(kids)) {
				if n, err := strconv.Atoi(k); err == nil {
					queue = append(queue, n)
				}
			}
		}
	}
	return ticks * uint64(clockTick), rss
}
