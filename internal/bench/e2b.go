package bench

import (
	"bytes"
	"cmp"
	"context"
	"debug/buildinfo"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"text/tabwriter"
	"time"

	"connectrpc.com/connect"

	"github.com/minisandbox/msb/internal/engine"
	"github.com/minisandbox/msb/internal/server/e2b"
	"github.com/minisandbox/msb/internal/server/e2b/envd/process"
	"github.com/minisandbox/msb/internal/server/e2b/envd/process/processconnect"
)

// The E2B benchmark (msb bench e2b) measures the E2B front end through the
// e2b Python SDK beside msb's native API on the same work, over loopback
// against one msb serve --e2b:
//
//   - create → first command: the SDK's Sandbox.create() of the base
//     template and commands.run("true") answered, against the native
//     create of a host-base sandbox and an exec of true;
//   - a command: commands.run("true") (bash -l -c true), against the
//     native exec of true, of that login shell, and of the script the
//     front end runs for it (e2b.CommandScript): the last is the same
//     work, so its difference is what the SDK and the front end add;
//   - the floor: the same SDK calls against a stub whose process service
//     answers Start at once, which is what the SDK's client costs alone;
//   - a load: many sandboxes of the async SDK, each running many commands,
//     counting commands lost (failed) and mixed (another's output);
//   - fork → first command: Forks children of one parent, from the fork
//     call to the first command answered in every child, through the
//     async SDK (e2b.MaxFork children a call, the calls concurrent) and
//     through the native fork of the same engine sandbox.
//
// Times are the Python client's perf_counter, in seconds on the wire.

//go:embed e2b_sdk.py
var e2bScript []byte

// E2BOptions size msb bench e2b.
type E2BOptions struct {
	// Exe is the msb binary whose serve runs as the daemon; StateDir its
	// state directory; ServeArgs more flags for it (the cache).
	Exe       string
	StateDir  string
	ServeArgs []string
	// Python is an interpreter with the e2b SDK.
	Python string
	// Rounds of create → first command per path, RTT commands per path.
	Rounds, RTT int
	// Gap is how long the client waits, untimed, before each create: a
	// trainer's work between episodes, in which the front end's spare of
	// the base template is made again (0: back to back).
	Gap time.Duration
	// Sandboxes × Commands is the load run, Concurrency calls in flight;
	// Sandboxes 0 leaves it out.
	Sandboxes, Commands, Concurrency int
	// Forks is the children of each of ForkRounds fork rounds per path;
	// Forks 0 leaves the fork out.
	Forks, ForkRounds int
	// Progress receives a line per phase (nil: none).
	Progress func(string)
}

// Paths of the E2B benchmark.
const (
	E2BPathE2B         = "e2b"          // the SDK against msb serve --e2b
	E2BPathNative      = "native"       // msb's own API, the same work
	E2BPathNativeLogin = "native_login" // msb's own API running what the SDK runs: bash -l -c true
	E2BPathNativeSame  = "native_same"  // msb's own API running what the front end runs for it (e2b.CommandScript)
	E2BPathFloor       = "floor"        // the SDK against a stub that answers at once
)

// Measures of the E2B benchmark.
const (
	E2BCreateFirst = "create_first" // create → first command answered
	E2BCommand     = "command"      // one command of true
	E2BFork        = "fork"         // fork of Forks children → a first command answered in each
)

// E2BReport is the result of msb bench e2b: each measure's times by
// path, the load run, and when, where and on what it ran.
type E2BReport struct {
	Date       string                                `json:"date"`
	Commit     string                                `json:"commit"`
	CPUs       int                                   `json:"cpus"`
	LoadBefore string                                `json:"load_before"`
	LoadAfter  string                                `json:"load_after"`
	LoadPeak   float64                               `json:"load_peak"` // the 1-minute load average's peak, sampled every loadInterval
	Rounds     int                                   `json:"rounds"`
	Gap        time.Duration                         `json:"gap_ns"`
	RTT        int                                   `json:"rtt"`
	Forks      int                                   `json:"forks"`
	Times      map[string]map[string][]time.Duration `json:"times_ns"` // measure → path → times
	Load       *E2BLoad                              `json:"load,omitempty"`
	Failed     string                                `json:"failed,omitempty"`
}

// E2BLoad is the load run's result.
type E2BLoad struct {
	Sandboxes   int      `json:"sandboxes"`
	Commands    int      `json:"commands"`
	Concurrency int      `json:"concurrency"`
	Wall        float64  `json:"wall"` // seconds
	Lost        int      `json:"lost"`
	Mixed       int      `json:"mixed"`
	Errors      []string `json:"errors"` // the first few
}

// ErrE2BOptions is an E2BOptions that cannot run.
var ErrE2BOptions = errors.New("bad options for the E2B benchmark")

// E2B runs the E2B benchmark; a failure stops it and is in the report.
func E2B(ctx context.Context, o E2BOptions) *E2BReport {
	rep := &E2BReport{Date: time.Now().UTC().Format(time.RFC3339), Commit: buildCommit(o.Exe), CPUs: runtime.NumCPU(),
		LoadBefore: loadAverage(), Rounds: o.Rounds, Gap: o.Gap, RTT: o.RTT, Forks: o.Forks, Times: map[string]map[string][]time.Duration{}}
	stop := peakLoad(&rep.LoadPeak)
	err := runE2B(ctx, o, rep)
	stop()
	rep.LoadAfter = loadAverage()
	if err != nil {
		rep.Failed = err.Error()
	}
	return rep
}

func runE2B(ctx context.Context, o E2BOptions, rep *E2BReport) error {
	if o.Rounds < 1 || o.RTT < 1 || o.Sandboxes < 0 || o.Sandboxes > 0 && (o.Commands < 1 || o.Concurrency < 1) || o.Python == "" ||
		o.Forks < 0 || o.Forks > engine.MaxForkCount || o.Forks > 0 && o.ForkRounds < 1 {
		return fmt.Errorf("%w: rounds %d and rtt %d at least 1, sandboxes %d at least 0 (then commands %d and concurrency %d at least 1), forks %d 0 to %d (then fork rounds %d at least 1), python %q",
			ErrE2BOptions, o.Rounds, o.RTT, o.Sandboxes, o.Commands, o.Concurrency, o.Forks, engine.MaxForkCount, o.ForkRounds, o.Python)
	}
	dir, err := os.MkdirTemp("", "msb-bench-e2b-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	script := filepath.Join(dir, "e2b_sdk.py")
	if err := os.WriteFile(script, e2bScript, 0o644); err != nil {
		return err
	}
	progress := func(s string) {
		if o.Progress != nil {
			o.Progress(s)
		}
	}
	progress("the SDK's floor: a stub that answers at once")
	if err := e2bFloor(ctx, o, script, rep); err != nil {
		return fmt.Errorf("the SDK's floor: %w", err)
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	e2bAddr := "127.0.0.1:" + strconv.Itoa(port)
	serveArgs := append([]string{"--e2b", e2bAddr, "--memory-budget", memoryBudget(o.Sandboxes + o.Forks)}, o.ServeArgs...)
	d, err := startServe(ctx, APIOptions{Exe: o.Exe, StateDir: o.StateDir, ServeArgs: serveArgs})
	if err != nil {
		return err
	}
	env := []string{"E2B_API_URL=http://" + e2bAddr, "E2B_SANDBOX_URL=http://" + e2bAddr, "E2B_API_KEY=" + d.token,
		"MSB_URL=http://" + d.tcp, "MSB_TOKEN=" + d.token}
	progress(fmt.Sprintf("latency: %d rounds of create → first command, %d commands per path, interleaved", o.Rounds, o.RTT))
	err = runScript(ctx, o.Python, script, env, rep, "latency", "--rounds", strconv.Itoa(o.Rounds), "--rtt", strconv.Itoa(o.RTT),
		"--gap", strconv.FormatFloat(o.Gap.Seconds(), 'f', -1, 64), "--same", e2b.CommandScript("true"))
	if err == nil && o.Sandboxes > 0 {
		progress(fmt.Sprintf("load: %d sandboxes × %d commands, %d in flight, async SDK", o.Sandboxes, o.Commands, o.Concurrency))
		err = runScript(ctx, o.Python, script, env, rep, "load", "--sandboxes", strconv.Itoa(o.Sandboxes),
			"--commands", strconv.Itoa(o.Commands), "--concurrency", strconv.Itoa(o.Concurrency))
	}
	if err == nil && o.Forks > 0 {
		progress(fmt.Sprintf("fork: %d rounds of %d children → first command, async SDK (%d a call) and native, interleaved", o.ForkRounds, o.Forks, e2b.MaxFork))
		err = runScript(ctx, o.Python, script, env, rep, "fork", "--rounds", strconv.Itoa(o.ForkRounds),
			"--forks", strconv.Itoa(o.Forks), "--max-fork", strconv.Itoa(e2b.MaxFork))
	}
	if serr := d.stop(); serr != nil && err == nil {
		err = fmt.Errorf("msb serve: %w: %s", serr, d.log.String())
	}
	return err
}

// memoryBudget is the daemon's --memory-budget: room for the load run's
// sandboxes (or a fork's children) all at once (each reserves 512M, docs/api.md), the spare and
// the grading reserve, and at least twice a sandbox's default memory
// limit (4G), which must fit in it. The default, the machine's available
// memory, would admit a few dozen here, and the SDK's creates past them
// would wait in line longer than its request timeout.
func memoryBudget(sandboxes int) string {
	return strconv.Itoa(max((sandboxes+4)*512, 8192)) + "M"
}

// scriptOut is what e2b_sdk.py prints: times in seconds by measure and path,
// and the load run.
type scriptOut struct {
	CreateFirst map[string][]float64 `json:"create_first"`
	Command     map[string][]float64 `json:"command"`
	Fork        map[string][]float64 `json:"fork"`
	Load        *E2BLoad             `json:"load"`
}

// runScript runs e2b_sdk.py in a mode and adds what it printed to rep.
func runScript(ctx context.Context, python, script string, env []string, rep *E2BReport, args ...string) error {
	cmd := exec.CommandContext(ctx, python, append([]string{script}, args...)...)
	cmd.Env = append(os.Environ(), append([]string{"PYTHONDONTWRITEBYTECODE=1"}, env...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("e2b_sdk.py %s: %w: %s", args[0], err, stderr.String())
	}
	var got scriptOut
	if err := json.Unmarshal(out, &got); err != nil {
		return fmt.Errorf("e2b_sdk.py %s printed %q: %w", args[0], out, err)
	}
	rep.add(E2BCreateFirst, got.CreateFirst)
	rep.add(E2BCommand, got.Command)
	rep.add(E2BFork, got.Fork)
	if got.Load != nil {
		rep.Load = got.Load
	}
	return nil
}

func (r *E2BReport) add(measure string, byPath map[string][]float64) {
	for path, secs := range byPath {
		if r.Times[measure] == nil {
			r.Times[measure] = map[string][]time.Duration{}
		}
		for _, s := range secs {
			r.Times[measure][path] = append(r.Times[measure][path], time.Duration(s*float64(time.Second)))
		}
	}
}

// e2bFloor runs the SDK's commands against floorHandler.
func e2bFloor(ctx context.Context, o E2BOptions, script string, rep *E2BReport) error {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: floorHandler(), Protocols: &p}
	go srv.Serve(l)
	defer srv.Close()
	url := "http://" + l.Addr().String()
	env := []string{"E2B_API_URL=" + url, "E2B_SANDBOX_URL=" + url, "E2B_API_KEY=floor"}
	return runScript(ctx, o.Python, script, env, rep, "floor", "--rtt", strconv.Itoa(o.RTT))
}

// floorHandler answers the SDK's create and kill of a sandbox and its
// process Start at once: the start event, then an exit of 0.
func floorHandler() http.Handler {
	mux := http.NewServeMux()
	create := func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		json.NewEncoder(w).Encode(map[string]any{"templateID": "base", "sandboxID": "floor", "clientID": "msb",
			"envdVersion": "0.5.7", "envdAccessToken": "floor"})
	}
	mux.HandleFunc("POST /sandboxes", create)
	mux.HandleFunc("POST /v2/sandboxes", create)
	mux.HandleFunc("DELETE /sandboxes/{id}", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	mux.Handle(processconnect.NewProcessHandler(floorProcess{}))
	return mux
}

// floorProcess is a process service whose every process exits at once.
type floorProcess struct {
	processconnect.UnimplementedProcessHandler
}

func (floorProcess) Start(ctx context.Context, req *connect.Request[process.StartRequest], stream *connect.ServerStream[process.StartResponse]) error {
	start := &process.ProcessEvent{Event: &process.ProcessEvent_Start{Start: &process.ProcessEvent_StartEvent{Pid: 1}}}
	if err := stream.Send(&process.StartResponse{Event: start}); err != nil {
		return err
	}
	end := &process.ProcessEvent{Event: &process.ProcessEvent_End{End: &process.ProcessEvent_EndEvent{Exited: true, Status: "exit status 0"}}}
	return stream.Send(&process.StartResponse{Event: end})
}

// peakLoad samples the 1-minute load average every loadInterval into
// *peak (its highest) until stop is called.
func peakLoad(peak *float64) (stop func()) {
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(loadInterval)
		defer tick.Stop()
		for {
			if l1, _, ok := readLoad(); ok && l1 > *peak {
				*peak = l1
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() { close(done); <-finished }
}

// buildCommit is the commit the binary exe was built from ("" when
// unknown), "+dirty" when its tree had changes.
func buildCommit(exe string) string {
	info, err := buildinfo.ReadFile(exe)
	if err != nil {
		return ""
	}
	var rev, dirty string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	return rev + dirty
}

// e2bRows is the order of the report's table.
var e2bRows = []struct{ measure, path, what string }{
	{E2BCreateFirst, E2BPathE2B, "Sandbox.create() → commands.run(\"true\") answered"},
	{E2BCreateFirst, E2BPathNative, "native create (host base) → exec true answered"},
	{E2BCommand, E2BPathE2B, "commands.run(\"true\") (bash -l -c true)"},
	{E2BCommand, E2BPathNative, "native exec true"},
	{E2BCommand, E2BPathNativeLogin, "native exec bash -l -c true"},
	{E2BCommand, E2BPathNativeSame, "native exec of what the front end runs for it"},
	{E2BCommand, E2BPathFloor, "commands.run(\"true\") against a stub that answers at once"},
	{E2BFork, E2BPathE2B, "async SDK: concurrent fork(count≤20) calls → commands.run(\"true\") answered in every child"},
	{E2BFork, E2BPathNative, "native fork of the same parent → exec true answered in every child"},
}

// WriteText prints r's table: each measure and path's n, p50 and p90.
func (r *E2BReport) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "E2B front end: %d rounds of create → first command (%s apart), %d commands per path, interleaved\n", r.Rounds, r.Gap, r.RTT)
	if r.Forks > 0 {
		fmt.Fprintf(w, "fork: %d children a round, from the fork call to a first command answered in every child\n", r.Forks)
	}
	fmt.Fprintf(w, "%s, commit %s, %d CPUs, load average before %s, after %s, peak %.2f\n\n",
		r.Date, cmp.Or(r.Commit, "unknown"), r.CPUs, r.LoadBefore, r.LoadAfter, r.LoadPeak)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "measure\tpath\tn\tp50\tp90")
	for _, row := range e2bRows {
		n, p50, p90 := p50p90(r.Times[row.measure][row.path])
		if n == 0 {
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", row.measure, row.what, n, fmtMs(p50), fmtMs(p90))
	}
	tw.Flush()
	if l := r.Load; l != nil {
		fmt.Fprintf(w, "\nload: %d sandboxes × %d commands through the async SDK, %d in flight: %.1f s, %.0f commands/s, %d lost, %d mixed\n",
			l.Sandboxes, l.Commands, l.Concurrency, l.Wall, float64(l.Sandboxes*l.Commands)/max(l.Wall, 1e-9), l.Lost, l.Mixed)
		for _, e := range l.Errors {
			fmt.Fprintf(w, "  %s\n", e)
		}
	}
	if r.Failed != "" {
		fmt.Fprintf(w, "FAILED: %s\n", r.Failed)
	}
	return nil
}

func fmtMs(d time.Duration) string {
	return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
}
