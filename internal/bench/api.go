package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/client"
)

// APIOptions size the API benchmarks (msb bench api).
type APIOptions struct {
	// Exe is the msb binary whose serve runs as the daemon.
	Exe string
	// ServeArgs are more flags for msb serve (the cache, a dataset).
	ServeArgs []string
	// StateDir is the daemon's state directory; SpareStateDir that of the
	// daemon with a spare (default StateDir/spares).
	StateDir, SpareStateDir string
	// Instance, when set, is a cached instance of the daemon's dataset for
	// the create → first exec measure.
	Instance string
	// RoundTrips is the number of execs per round-trip measure.
	RoundTrips int
	// Creates is the number of create → first exec rounds.
	Creates int
	// Sandboxes × Execs is the load run, Concurrency requests at once.
	Sandboxes, Execs, Concurrency int
	// SwerexRemote is SWE-ReX's swerex-remote; with it the same load runs
	// through SwerexServers of them (one per "sandbox", as SWE-ReX runs).
	SwerexRemote  string
	SwerexServers int
}

// daemonProc is msb serve running as a child process.
type daemonProc struct {
	cmd   *exec.Cmd
	dir   string
	state string // its --state-dir: a sandbox's state dir is state/ID
	sock  string
	tcp   string
	token string
	log   bytes.Buffer
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitHTTP polls url until it answers (any status) or the timeout passes.
func waitHTTP(ctx context.Context, hc *http.Client, url string, header map[string]string) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := hc.Do(req)
		if err == nil {
			resp.Body.Close()
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%s did not answer: %w", url, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func startServe(ctx context.Context, o APIOptions) (*daemonProc, error) {
	dir, err := os.MkdirTemp("", "msb-bench-api-")
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	d := &daemonProc{dir: dir, state: o.StateDir, sock: filepath.Join(dir, "msb.sock"), tcp: "127.0.0.1:" + strconv.Itoa(port), token: "bench-" + strconv.Itoa(os.Getpid())}
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(d.token+"\n"), 0o600); err != nil {
		return nil, err
	}
	args := append([]string{"serve", "--state-dir", o.StateDir, "--listen", "unix://" + d.sock, "--listen", d.tcp, "--token-file", tokenFile,
		"--lifetime", "0", "--idle-timeout", "0"}, o.ServeArgs...)
	d.cmd = exec.CommandContext(ctx, o.Exe, args...)
	d.cmd.Stderr = &d.log
	d.cmd.Cancel = func() error { return d.cmd.Process.Signal(syscall.SIGTERM) }
	d.cmd.WaitDelay = 30 * time.Second
	if err := d.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	c, _ := client.New("unix://"+d.sock, "")
	defer c.Close()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := c.Health(ctx); err == nil {
			return d, nil
		}
		if time.Now().After(deadline) || d.cmd.ProcessState != nil {
			d.stop()
			return nil, fmt.Errorf("msb serve did not come up: %s", d.log.String())
		}
	}
}

func (d *daemonProc) stop() error {
	d.cmd.Process.Signal(syscall.SIGTERM)
	err := d.cmd.Wait()
	os.RemoveAll(d.dir)
	return err
}

// rss is a process's resident memory in bytes (VmRSS).
func rss(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// API measures the daemon: exec round trips over the unix socket and
// loopback TCP, create from a cached instance → first exec, a load of
// Sandboxes × Execs with lost or mixed outputs counted, the daemon's
// memory per sandbox, and the same through swerex-remote for the ratio.
func API(ctx context.Context, o APIOptions) []Row {
	d, err := startServe(ctx, o)
	if err != nil {
		return []Row{{Name: "msb serve", Failed: err.Error()}}
	}
	defer d.stop()
	unix, _ := client.New("unix://"+d.sock, "")
	tcp, _ := client.New("http://"+d.tcp, d.token)
	defer unix.Close()
	defer tcp.Close()
	var rows []Row
	sb, err := unix.CreateSandbox(ctx, api.CreateSandboxRequest{Limits: api.Limits{MemoryBytes: 256 << 20}})
	if err != nil {
		return []Row{{Name: "create a sandbox", Failed: err.Error()}}
	}
	if err := unix.OpenSession(ctx, sb.ID, api.SessionRequest{Name: "bench"}); err != nil {
		return []Row{{Name: "open a session", Failed: err.Error()}}
	}
	for _, m := range []struct {
		name string
		c    *client.Client
		req  api.ExecRequest
	}{
		{"exec round trip, session, unix socket (`true`)", unix, api.ExecRequest{Session: "bench", Command: "true"}},
		{"exec round trip, session, loopback TCP (`true`)", tcp, api.ExecRequest{Session: "bench", Command: "true"}},
		{"exec round trip, fresh bash, unix socket (`true`)", unix, api.ExecRequest{Command: "true"}},
		{"exec round trip, fresh bash, loopback TCP (`true`)", tcp, api.ExecRequest{Command: "true"}},
	} {
		st, err := timeN(o.RoundTrips, func() error {
			res, err := m.c.Exec(ctx, sb.ID, m.req)
			if err == nil && res.ExitCode != 0 {
				err = fmt.Errorf("exit %d", res.ExitCode)
			}
			return err
		})
		rows = append(rows, apiRow(m.name, st, err))
	}
	rexURL := "http://" + d.tcp + "/swerex/" + sb.ID
	rexStats, err := rexRoundTrips(ctx, rexURL, d.token, o.RoundTrips)
	rows = append(rows, apiRow("SWE-ReX route of msb: run_in_session round trip (`true`)", rexStats, err))
	unix.DeleteSandbox(ctx, sb.ID)

	if o.Instance != "" {
		rows = append(rows, createRows(ctx, o, unix)...)
	}
	rows = append(rows, msbLoad(ctx, d, unix, o)...)
	if o.SwerexRemote != "" {
		rows = append(rows, swerexLoad(ctx, o)...)
	}
	return rows
}

// createRows times create from a cached instance → first exec answered on
// the daemon (c) and on a second daemon kept with one spare (--spares 1),
// rounds interleaved; before each pair of rounds the last spare round's
// refill is awaited (untimed), so that no round runs beside it and every
// spare round is what a create that finds its spare costs.
func createRows(ctx context.Context, o APIOptions, c *client.Client) []Row {
	took, errs, err := createTimes(ctx, o, c)
	if err != nil {
		return []Row{{Name: "create from a cached instance", Failed: err.Error()}}
	}
	note := "instance " + o.Instance + " (sandbox deleted after each round, untimed)"
	spareNote := "rounds interleaved with the row above; the spare's refill awaited between rounds, untimed"
	rows := []Row{
		apiRow("create from a cached instance → first exec answered", Summarize(took[0][0]), errs[0][0]),
		apiRow("… the same on a daemon with --spares 1 (a spare ready)", Summarize(took[0][1]), errs[0][1]),
		apiRow("create from a cached instance with a session → its first command answered", Summarize(took[1][0]), errs[1][0]),
		apiRow("… the same with --spares 1 (the spare's session shell started ahead)", Summarize(took[1][1]), errs[1][1]),
	}
	rows[0].Note, rows[1].Note, rows[2].Note, rows[3].Note = note, spareNote, note, spareNote
	return rows
}

// createTimes are createRows' rounds: took[way][spare] (way 0: a fresh
// bash, 1: a session; spare 0: the daemon c, 1: one with --spares 1)
// and the error that stopped each; err is what stopped them all.
func createTimes(ctx context.Context, o APIOptions, c *client.Client) (took [2][2][]time.Duration, errs [2][2]error, err error) {
	// The first create builds the instance's layers (untimed).
	if info, err := c.CreateSandbox(ctx, api.CreateSandboxRequest{InstanceID: o.Instance}); err != nil {
		return took, errs, err
	} else {
		c.DeleteSandbox(ctx, info.ID)
	}
	so := o
	so.StateDir = o.SpareStateDir
	if so.StateDir == "" {
		so.StateDir = filepath.Join(o.StateDir, "spares")
	}
	so.ServeArgs = append(append([]string(nil), o.ServeArgs...), "--spares", "1")
	d2, err := startServe(ctx, so)
	if err != nil {
		return took, errs, fmt.Errorf("msb serve --spares 1: %w", err)
	}
	defer d2.stop()
	warmC, _ := client.New("unix://"+d2.sock, "")
	defer warmC.Close()
	// round creates, runs `true` and deletes; it returns the time until
	// the command was answered. In a session, the create opens it (as a
	// create and then SWE-ReX's create_session would); else in a fresh
	// bash.
	round := func(c *client.Client, inSession bool) (time.Duration, error) {
		start := time.Now()
		creq, req := api.CreateSandboxRequest{InstanceID: o.Instance}, api.ExecRequest{Command: "true"}
		if inSession {
			creq.Session, req.Session = "agent", "agent"
		}
		info, err := c.CreateSandbox(ctx, creq)
		if err != nil {
			return 0, err
		}
		res, err := c.Exec(ctx, info.ID, req)
		took := time.Since(start)
		c.DeleteSandbox(ctx, info.ID)
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("exit %d", res.ExitCode)
		}
		return took, err
	}
	if _, err := round(warmC, false); err != nil { // its first create makes the spare
		return took, errs, fmt.Errorf("msb serve --spares 1: %w", err)
	}
	// Per way of answering (fresh bash, session): without and with a spare.
	failed := func() bool { return errors.Join(errs[0][0], errs[0][1], errs[1][0], errs[1][1]) != nil }
	for i := 0; i < o.Creates && !failed(); i++ {
		for way := range 2 {
			for spare, cl := range []*client.Client{c, warmC} {
				// The last spare round's refill is done before any round
				// runs, and nothing takes the spare until a spare round.
				if err := sparesReady(ctx, d2); err != nil {
					errs[way][1] = err
					break
				}
				d, err := round(cl, way == 1)
				if errs[way][spare] = err; err == nil {
					took[way][spare] = append(took[way][spare], d)
				}
			}
		}
	}
	return took, errs, nil
}

// sparesReady waits until the daemon reports a spare ready.
func sparesReady(ctx context.Context, d *daemonProc) error {
	hc := &http.Client{Timeout: 10 * time.Second}
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+d.tcp+"/metrics", nil)
		req.Header.Set("Authorization", "Bearer "+d.token)
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		if bytes.Contains(b, []byte(`msb_pool_spares{kind="instance",state="ready"} 1`)) {
			return nil
		}
	}
	return fmt.Errorf("the daemon with --spares 1 made no spare within a minute")
}

func apiRow(name string, s Stats, err error) Row {
	r := Row{Name: name, Stats: s}
	if err != nil {
		r.Failed = err.Error()
	}
	return r
}

func timeN(n int, f func() error) (Stats, error) {
	d := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		start := time.Now()
		if err := f(); err != nil {
			return Summarize(d), err
		}
		d = append(d, time.Since(start))
	}
	return Summarize(d), nil
}

// rexClient posts SWE-ReX requests as RemoteRuntime does.
type rexClient struct {
	url, token string
	hc         *http.Client
}

func (r *rexClient) post(ctx context.Context, path string, body any, out any) error {
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, "POST", r.url+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-Key", r.token)
	resp, err := r.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != 200 {
		return fmt.Errorf("%s: %d %s", path, resp.StatusCode, bytes.TrimSpace(data))
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

func newRexClient(url, token string) *rexClient {
	return &rexClient{url: url, token: token, hc: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
}

func rexSession(ctx context.Context, c *rexClient) error {
	return c.post(ctx, "/create_session", map[string]any{"startup_source": []string{}, "session": "bench", "session_type": "bash", "startup_timeout": 10.0}, nil)
}

func rexRun(ctx context.Context, c *rexClient, command string) (string, error) {
	var obs struct {
		Output   string `json:"output"`
		ExitCode *int   `json:"exit_code"`
	}
	err := c.post(ctx, "/run_in_session", map[string]any{"action_type": "bash", "command": command, "session": "bench", "timeout": 30.0,
		"is_interactive_command": false, "is_interactive_quit": false, "check": "silent", "error_msg": "", "expect": []string{}}, &obs)
	return obs.Output, err
}

func rexRoundTrips(ctx context.Context, url, token string, n int) (Stats, error) {
	c := newRexClient(url, token)
	if err := rexSession(ctx, c); err != nil {
		return Stats{}, err
	}
	return timeN(n, func() error { _, err := rexRun(ctx, c, "true"); return err })
}

// loadResult is a load run: latencies, lost and mixed outputs, time.
type loadResult struct {
	lat          []time.Duration
	lost, mixed  int64
	elapsed      time.Duration
	firstFailure string
}

// runLoad runs execs × targets commands, concurrency at once; each
// command prints a token unique to its target and round, which the
// answer must hold exactly.
func runLoad(ctx context.Context, targets, execs, concurrency int, run func(target, i int, want string) (string, error)) loadResult {
	type job struct{ t, i int }
	jobs := make(chan job)
	var mu sync.Mutex
	var res loadResult
	var lost, mixed atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < concurrency; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				want := fmt.Sprintf("t%d-i%d-%x", j.t, j.i, j.t*7919+j.i)
				t0 := time.Now()
				got, err := run(j.t, j.i, want)
				d := time.Since(t0)
				mu.Lock()
				switch {
				case err != nil:
					lost.Add(1)
					if res.firstFailure == "" {
						res.firstFailure = err.Error()
					}
				case strings.TrimSpace(got) != want:
					mixed.Add(1)
					if res.firstFailure == "" {
						res.firstFailure = fmt.Sprintf("wanted %q, got %q", want, got)
					}
				default:
					res.lat = append(res.lat, d)
				}
				mu.Unlock()
			}
		}()
	}
	for i := 0; i < execs; i++ {
		for t := 0; t < targets; t++ {
			jobs <- job{t, i}
		}
	}
	close(jobs)
	wg.Wait()
	res.elapsed = time.Since(start)
	res.lost, res.mixed = lost.Load(), mixed.Load()
	return res
}

// loadRows reports a load run; ours says whether lost or mixed outputs
// are msb's failure (they are only noted for the baseline).
func loadRows(prefix string, r loadResult, targets, execs int, ours bool) []Row {
	row := Row{Name: fmt.Sprintf("%s: %d × %d execs, latency", prefix, targets, execs), Stats: Summarize(r.lat),
		Note: fmt.Sprintf("%d lost, %d mixed", r.lost, r.mixed)}
	if r.lost+r.mixed > 0 {
		row.Note += "; first: " + r.firstFailure
		if ours {
			row.Failed = row.Note
		}
	}
	tput := Row{Name: prefix + ": throughput", Value: float64(len(r.lat)) / r.elapsed.Seconds(), Unit: "execs/s"}
	return []Row{row, tput}
}

// daemonMemory is the PSS of the daemon's whole process tree and how many
// processes it holds: the daemon, and every sandbox's supervisor, init and
// shells, which are its descendants.
func daemonMemory(pid int) (pss int64, procs int) {
	pids := treePids(pid)
	for _, p := range pids {
		pss += pssOf(p)
	}
	return pss, len(pids)
}

func msbLoad(ctx context.Context, d *daemonProc, c *client.Client, o APIOptions) []Row {
	daemon := d.cmd.Process.Pid
	before, nBefore := daemonMemory(daemon)
	rssBefore := rss(daemon)
	ids := make([]string, o.Sandboxes)
	var firstErr error
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			info, err := c.CreateSandbox(ctx, api.CreateSandboxRequest{Limits: api.Limits{MemoryBytes: 64 << 20}, Labels: map[string]string{"bench": "load"}})
			if err == nil {
				err = c.OpenSession(ctx, info.ID, api.SessionRequest{Name: "bench"})
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil && firstErr == nil {
				firstErr = err
			}
			ids[i] = info.ID
		}()
	}
	wg.Wait()
	defer func() {
		for _, id := range ids {
			if id != "" {
				c.DeleteSandbox(context.WithoutCancel(ctx), id)
			}
		}
	}()
	if firstErr != nil {
		return []Row{{Name: fmt.Sprintf("msb: %d sandboxes", o.Sandboxes), Failed: firstErr.Error()}}
	}
	after, nAfter := daemonMemory(daemon)
	rssAfter := rss(daemon)
	r := runLoad(ctx, o.Sandboxes, o.Execs, o.Concurrency, func(t, i int, want string) (string, error) {
		res, err := c.Exec(ctx, ids[t], api.ExecRequest{Session: "bench", Command: "echo " + want})
		return res.Stdout, err
	})
	rows := loadRows(fmt.Sprintf("msb (session exec, %d at once)", o.Concurrency), r, o.Sandboxes, o.Execs, true)
	rows = append(rows, Row{Name: "msb: memory per live sandbox with a session (PSS growth of the daemon's whole process tree / sandboxes)", Value: float64(after-before) / float64(o.Sandboxes) / 1024,
		Unit: "KiB", Note: fmt.Sprintf("every process of a sandbox counted (its supervisor, init and session shell) and the daemon's share: tree PSS %d MiB → %d MiB, %d → %d processes, with %d sandboxes (the daemon's own RSS %d MiB → %d MiB)",
			before>>20, after>>20, nBefore, nAfter, o.Sandboxes, rssBefore>>20, rssAfter>>20)})
	return rows
}

// swerexLoad runs the load through swerex-remote servers, one per target
// as SWE-ReX deploys them.
func swerexLoad(ctx context.Context, o APIOptions) []Row {
	n := o.SwerexServers
	type srv struct {
		cmd *exec.Cmd
		c   *rexClient
	}
	servers := make([]srv, 0, n)
	defer func() {
		for _, s := range servers {
			s.cmd.Process.Signal(syscall.SIGTERM)
			s.cmd.Wait()
		}
	}()
	var mem int64
	for i := 0; i < n; i++ {
		port, err := freePort()
		if err != nil {
			return []Row{{Name: "swerex-remote", Failed: err.Error()}}
		}
		cmd := exec.CommandContext(ctx, o.SwerexRemote, "--host", "127.0.0.1", "--port", strconv.Itoa(port), "--auth-token", "bench")
		var log bytes.Buffer
		cmd.Stdout, cmd.Stderr = &log, &log
		if err := cmd.Start(); err != nil {
			return []Row{{Name: "swerex-remote", Failed: err.Error()}}
		}
		c := newRexClient("http://127.0.0.1:"+strconv.Itoa(port), "bench")
		servers = append(servers, srv{cmd, c})
		if err := waitHTTP(ctx, c.hc, c.url+"/is_alive", map[string]string{"X-API-Key": "bench"}); err != nil {
			return []Row{{Name: "swerex-remote", Failed: err.Error() + ": " + firstLines(log.String())}}
		}
		if err := rexSession(ctx, c); err != nil {
			return []Row{{Name: "swerex-remote", Failed: err.Error()}}
		}
		pss, _ := treePSS([]int{cmd.Process.Pid})
		mem += pss
	}
	rt, err := timeN(o.RoundTrips/4, func() error { _, err := rexRun(ctx, servers[0].c, "true"); return err })
	rows := []Row{apiRow("swerex-remote: run_in_session round trip (`true`)", rt, err)}
	r := runLoad(ctx, n, o.Execs, min(o.Concurrency, n), func(t, i int, want string) (string, error) {
		return rexRun(ctx, servers[t].c, "echo "+want)
	})
	rows = append(rows, loadRows(fmt.Sprintf("swerex-remote (run_in_session, %d at once)", min(o.Concurrency, n)), r, n, o.Execs, false)...)
	rows = append(rows, Row{Name: "swerex-remote: memory per server with a session (PSS of the server's whole process tree: the server and its shell)", Value: float64(mem) / float64(n) / 1024, Unit: "KiB",
		Note: "one server per sandbox, as SWE-ReX runs; commands run on the host, unsandboxed"})
	return rows
}

func firstLines(s string) string {
	sc := bufio.NewScanner(strings.NewReader(s))
	var out []string
	for sc.Scan() && len(out) < 5 {
		out = append(out, sc.Text())
	}
	return strings.Join(out, " | ")
}
