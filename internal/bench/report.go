package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/minisandbox/msb/internal/sandbox"
	"golang.org/x/sys/unix"
)

// Report is one run: where and how it ran, what it skipped and why, what
// failed, and every sample.
type Report struct {
	Started   time.Time      `json:"started"`
	Finished  time.Time      `json:"finished"`
	Command   string         `json:"command"`
	Machine   Machine        `json:"machine"`
	Options   Options        `json:"options"`
	Workloads []WorkloadInfo `json:"workloads"`
	Notes     []string       `json:"notes,omitempty"`
	Skipped   []string       `json:"skipped,omitempty"`
	Failures  []string       `json:"failures,omitempty"`
	// Goals is issue 32's table (msb bench goals).
	Goals   []GoalRow `json:"goals,omitempty"`
	Samples []Sample  `json:"-"` // in samples.csv
}

// Machine describes the host a report comes from.
type Machine struct {
	Kernel    string `json:"kernel"`
	CPU       string `json:"cpu"`
	CPUs      int    `json:"cpus"`
	MemTotal  int64  `json:"mem_total_bytes"`
	Mode      string `json:"mode"`   // msb's: root or rootless
	Cgroup    string `json:"cgroup"` // what msb's sandboxes use
	Podman    string `json:"podman,omitempty"`
	Go        string `json:"go"`
	LoadStart string `json:"load_start"` // /proc/loadavg
	LoadEnd   string `json:"load_end"`
}

func newReport(rt *sandbox.Runtime, o Options) *Report {
	var u unix.Utsname
	unix.Uname(&u)
	m := Machine{Kernel: unix.ByteSliceToString(u.Release[:]), CPU: cpuModel(), CPUs: runtime.NumCPU(), MemTotal: memTotal(),
		Mode: rt.Mode(), Go: runtime.Version(), LoadStart: loadAvg()}
	if cg := rt.Cgroup(); cg.Usable() {
		m.Cgroup = string(cg.Version)
	} else {
		m.Cgroup = "none (" + cg.Reason + ")"
	}
	return &Report{Started: time.Now(), Machine: m, Options: o}
}

func cpuModel() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

func memTotal() int64 {
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) != nil {
		return 0
	}
	return int64(si.Totalram) * int64(si.Unit)
}

func loadAvg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// Write puts the report into dir: samples.csv (every sample),
// summary.csv (every Key's distribution and ratios), summary.txt and
// summary.md (the tables), report.json, and the plots.
func (r *Report) Write(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var files []string
	write := func(name string, f func(w io.Writer) error) error {
		p := filepath.Join(dir, name)
		out, err := os.Create(p)
		if err != nil {
			return err
		}
		if err := f(out); err != nil {
			out.Close()
			return fmt.Errorf("writing %s: %w", p, err)
		}
		files = append(files, p)
		return out.Close()
	}
	steps := []struct {
		name string
		f    func(io.Writer) error
	}{
		{"samples.csv", func(w io.Writer) error { return WriteCSV(w, r.Samples) }},
		{"summary.csv", func(w io.Writer) error { return writeSummaryCSV(w, Summaries(r.Samples)) }},
		{"summary.txt", r.WriteText},
		{"summary.md", r.WriteMarkdown},
		{"report.json", func(w io.Writer) error {
			e := json.NewEncoder(w)
			e.SetIndent("", "  ")
			return e.Encode(r)
		}},
	}
	for _, s := range steps {
		if err := write(s.name, s.f); err != nil {
			return files, err
		}
	}
	plots, err := Plot(r.Samples, dir)
	return append(files, plots...), err
}

func writeSummaryCSV(w io.Writer, sums []Summary) error {
	fmt.Fprintln(w, "measure,workload,method,phase,cache,param,unit,n,p50,p95,mean,min,max,ratio_podman,ratio_paper,ratio_raw")
	for _, s := range sums {
		ratio := func(b string) string {
			if v, ok := s.Ratio[b]; ok {
				return fmt.Sprintf("%.6g", v)
			}
			return ""
		}
		if _, err := fmt.Fprintf(w, "%s,%s,%s,%s,%s,%s,%s,%d,%.6g,%.6g,%.6g,%.6g,%.6g,%s,%s,%s\n", s.Measure, s.Workload, s.Method, s.Phase, s.Cache, s.Param,
			s.Unit, s.N, s.P50, s.P95, s.Mean, s.Min, s.Max, ratio(MethodPodman), ratio(MethodPaper), ratio(MethodRaw)); err != nil {
			return err
		}
	}
	return nil
}

// header is what every rendering starts with.
func (r *Report) header() []string {
	m := r.Machine
	lines := []string{
		fmt.Sprintf("%s, %s; %d CPUs (%s), %.1f GiB; kernel %s; msb %s mode, cgroup %s; podman %s",
			r.Started.Format("2006-01-02 15:04 MST"), r.Finished.Sub(r.Started).Round(time.Second), m.CPUs, m.CPU, float64(m.MemTotal)/(1<<30),
			m.Kernel, m.Mode, m.Cgroup, orNone(m.Podman)),
		fmt.Sprintf("load average at start %s, at end %s", m.LoadStart, m.LoadEnd),
	}
	if r.Command != "" {
		lines = append(lines, "command: "+r.Command)
	}
	for _, w := range r.Workloads {
		if w.Instances == 0 {
			lines = append(lines, fmt.Sprintf("workload %s: the host's system dirs; the shell answers %q", w.Name, w.Answer))
			continue
		}
		lines = append(lines, fmt.Sprintf("workload %s: %d commits of %s (%s) sharing one environment; the shell answers %q, then the task runs %q",
			w.Name, w.Instances, w.Repo, w.Source, w.Answer, w.Task))
	}
	return lines
}

func orNone(s string) string {
	if s == "" {
		return "not used"
	}
	return s
}

// WriteText writes the header, the tables and the notes as plain text.
func (r *Report) WriteText(w io.Writer) error {
	for _, l := range r.header() {
		fmt.Fprintln(w, l)
	}
	for _, t := range r.tables() {
		fmt.Fprintf(w, "\n%s\n", t.title)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, strings.Join(t.header, "\t"))
		for _, row := range t.rows {
			fmt.Fprintln(tw, strings.Join(row, "\t"))
		}
		tw.Flush()
	}
	r.writeNotes(w, "")
	return nil
}

// WriteMarkdown writes the same as WriteText as markdown (docs/bench.md's
// "Results" section is made from it).
func (r *Report) WriteMarkdown(w io.Writer) error {
	for _, l := range r.header() {
		fmt.Fprintf(w, "%s  \n", l)
	}
	for _, t := range r.tables() {
		fmt.Fprintf(w, "\n**%s**\n\n| %s |\n|%s\n", t.title, strings.Join(t.header, " | "), strings.Repeat("---|", len(t.header)))
		for _, row := range t.rows {
			fmt.Fprintf(w, "| %s |\n", strings.Join(row, " | "))
		}
	}
	r.writeNotes(w, "- ")
	return nil
}

func (r *Report) writeNotes(w io.Writer, bullet string) {
	for _, sec := range []struct {
		title string
		lines []string
	}{{"Notes", r.Notes}, {"Skipped", r.Skipped}, {"FAILED", r.Failures}} {
		if len(sec.lines) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s:\n", sec.title)
		for _, l := range sec.lines {
			if bullet == "" {
				fmt.Fprintf(w, "  %s\n", l)
			} else {
				fmt.Fprintf(w, "%s%s\n", bullet, l)
			}
		}
	}
}
