//go:build !msblean

package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/user"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/minisandbox/msb/internal/engine"
	"github.com/minisandbox/msb/internal/server"
	"github.com/minisandbox/msb/internal/server/e2b"
	"github.com/minisandbox/msb/internal/server/tlslisten"
	"github.com/minisandbox/msb/internal/socketdir"
)

type serveFlags struct {
	datasetFlags
	envFlags
	listen         []string
	tokenFile      string
	socketGroup    string
	maxSandboxes   int
	gradingReserve int
	spares         int
	sparesPer      int
	spareIdle      time.Duration
	memoryBudget   string
	diskBudget     string
	memory, disk   string
	lifetime, idle time.Duration
	maxBody        string
	maxWait, grace time.Duration
	stepTimeout    time.Duration
	testTimeout    time.Duration
	outDir         string
	logJSON        bool
	swerex         bool
	instance       string
	host           string
	port           int
	authToken      string
	e2b            string
	e2bBase        string
	e2bPause       time.Duration
	tlsCert        string
	tlsKey         string
	compactUnused  time.Duration
}

func newServeCmd(g *globals) *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve [--listen unix:///run/msb/msb.sock | --listen 127.0.0.1:7777 --token-file FILE]",
		Short: "Run the daemon: the HTTP API (native /v1, SWE-ReX-compatible, gym) over one engine",
		Example: `  msb serve                                    # unix socket: /run/msb/msb.sock as root, $XDG_RUNTIME_DIR/msb.sock otherwise
  msb serve --listen 127.0.0.1:7777 --token-file token --dataset demo/dataset.jsonl --spec demo/specs.yaml --cache demo/cache
  msb serve --swerex --instance demo__calc-1 --dataset demo/dataset.jsonl --port 8000 --auth-token secret   # like swerex-remote`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return runServe(cmd.Context(), g, &f, cmd) },
	}
	fs := cmd.Flags()
	f.datasetFlags.register(fs)
	f.envFlags.register(fs)
	fs.StringArrayVar(&f.listen, "listen", nil, "unix:///path/msb.sock or host:port (repeatable; default the unix socket); TCP needs a token")
	fs.StringVar(&f.tokenFile, "token-file", "", "file whose first line is the token TCP clients must send (Authorization: Bearer; env MSB_TOKEN)")
	fs.StringVar(&f.socketGroup, "socket-group", "", "group that may use the unix socket (mode 0660; default only you, 0600)")
	fs.IntVar(&f.maxSandboxes, "max-sandboxes", 0, "live sandboxes at once, evaluations' included (0: no bound)")
	fs.IntVar(&f.gradingReserve, "grading-reserve", 1, "evaluation sandboxes the budgets keep room for that agents' sandboxes cannot take (0: none)")
	fs.IntVar(&f.spares, "spares", 0, "sandboxes kept started ahead (the warm pool) for the instances, images and snapshots asked for most recently, taken by the next create or fork that matches (0: none); they hold room within the quotas and yield it to creates")
	fs.IntVar(&f.sparesPer, "spares-per-instance", 1, "spares of one instance or image once created (with --spares; a create's warm asks for its own number)")
	fs.DurationVar(&f.spareIdle, "spare-idle", 5*time.Minute, "a spare nobody takes for this long is closed")
	fs.StringVar(&f.memoryBudget, "memory-budget", "", "memory all sandboxes may reserve, each counted as the smaller of its limit and 512M (docs/api.md), e.g. 16G (default: available memory)")
	fs.StringVar(&f.diskBudget, "disk-budget", "", "disk all sandboxes may reserve (their disk limits), e.g. 200G (default: none)")
	fs.StringVar(&f.memory, "memory", "", "default memory limit of a sandbox (default 4G)")
	fs.StringVar(&f.disk, "disk", "", "default disk limit of a sandbox (needed with --disk-budget)")
	fs.DurationVar(&f.lifetime, "lifetime", 6*time.Hour, "default lifetime of a sandbox (0: none)")
	fs.DurationVar(&f.idle, "idle-timeout", 30*time.Minute, "default idle timeout of a sandbox (0: none)")
	fs.StringVar(&f.maxBody, "max-body", "64M", "largest request body (commands, files, tars)")
	fs.DurationVar(&f.maxWait, "max-admission-wait", 10*time.Minute, "longest a request may wait for room (admission_wait_ns)")
	fs.DurationVar(&f.grace, "shutdown-grace", 10*time.Second, "time requests in flight get to finish at SIGTERM")
	fs.DurationVar(&f.stepTimeout, "step-timeout", 10*time.Minute, "timeout of a gym step that names none")
	fs.DurationVar(&f.testTimeout, "timeout", 30*time.Minute, "test command timeout of an evaluation")
	fs.StringVar(&f.outDir, "out", "logs/run_evaluation", "where batch jobs write the harness's files")
	fs.BoolVar(&f.logJSON, "log-json", false, "log as JSON lines (default text) to stderr")
	fs.BoolVar(&f.swerex, "swerex", false, "serve one sandbox with SWE-ReX's routes at the root, like swerex-remote")
	fs.StringVar(&f.instance, "instance", "", "with --swerex: the instance whose task sandbox to serve (default: a sandbox on the host's system directories)")
	fs.StringVar(&f.host, "host", "0.0.0.0", "with --swerex: address to listen on (swerex-remote's flag)")
	fs.IntVar(&f.port, "port", 8000, "with --swerex: port to listen on (swerex-remote's flag)")
	fs.StringVar(&f.authToken, "auth-token", "", "with --swerex: the X-API-Key clients must send (swerex-remote's flag)")
	fs.StringVar(&f.e2b, "e2b", "", "also answer the e2b SDKs on this host:port (E2B_API_URL and E2B_SANDBOX_URL; the token is the API key; docs/e2b.md)")
	fs.StringVar(&f.e2bBase, "e2b-base", "", "with --e2b: the root of E2B's base template, a root the cache holds (debian/e2b: docs/e2b.md, \"The E2B base\"); its commands run as E2B's user `user` (default: the host's directories, as root)")
	fs.DurationVar(&f.e2bPause, "e2b-shutdown-pause", time.Minute, "with --e2b: time SIGTERM gives pausing the running E2B sandboxes, as pause() does, so that the next daemon on the cache lists them paused and resumes them with their files, and their running processes where the engine could dump them (0: close them, losing their files; docs/e2b.md \"At shutdown\")")
	fs.StringVar(&f.tlsCert, "tls-cert", "", "serve the TCP listeners (--listen host:port, --e2b, --swerex's) over HTTPS with this PEM certificate (the server's, then its intermediates; for E2B sandbox URLs a wildcard *.<domain>), read again when it changes (docs/e2b.md \"Sandbox URLs\")")
	fs.StringVar(&f.tlsKey, "tls-key", "", "with --tls-cert: the PEM private key of its certificate")
	fs.DurationVar(&f.compactUnused, "compact-unused", defaultCompactUnused, "compact in the background, every hour (or this often when shorter), the cache's layers no sandbox used for this long, as msb cache compact --unused-for does: their objects kept zstd-compressed until their next use thaws them (0: never; docs/envcache.md)")
	return cmd
}

func runServe(ctx context.Context, g *globals, f *serveFlags, cmd *cobra.Command) error {
	o := engineOptions{env: &f.envFlags, specFile: f.specFile, timeout: f.testTimeout, newCache: true, newState: true}
	var err error
	if o.limits.MemoryBytes, err = sizeFlag(cmd.Flags(), "memory", f.memory); err != nil {
		return err
	}
	if o.limits.DiskBytes, err = sizeFlag(cmd.Flags(), "disk", f.disk); err != nil {
		return err
	}
	memBudget, err := sizeFlag(cmd.Flags(), "memory-budget", f.memoryBudget)
	if err != nil {
		return err
	}
	diskBudget, err := sizeFlag(cmd.Flags(), "disk-budget", f.diskBudget)
	if err != nil {
		return err
	}
	maxBody, err := sizeFlag(cmd.Flags(), "max-body", f.maxBody)
	if err != nil {
		return err
	}
	if f.maxSandboxes < 0 || f.gradingReserve < 0 || f.spares < 0 || f.sparesPer < 1 || f.spareIdle <= 0 || f.lifetime < 0 || f.idle < 0 {
		return fmt.Errorf("%w: --max-sandboxes, --grading-reserve, --spares, --lifetime and --idle-timeout must not be negative, --spares-per-instance and --spare-idle must be positive", errUsage)
	}
	if f.instance != "" && !f.swerex {
		return fmt.Errorf("%w: --instance is for --swerex (the one sandbox it serves)", errUsage)
	}
	token, err := f.token(g)
	if err != nil {
		return err
	}
	listens := f.listen
	if f.swerex {
		if f.authToken == "" && token == "" {
			return fmt.Errorf("%w: --swerex needs --auth-token (as swerex-remote does)", errUsage)
		}
		listens = append(listens, net.JoinHostPort(f.host, strconv.Itoa(f.port)))
	}
	if len(listens) == 0 {
		listens = []string{"unix://" + socketdir.Default(g.env.UID, g.env.RuntimeDir)}
	}
	group := -1
	if f.socketGroup != "" {
		gr, err := user.LookupGroup(f.socketGroup)
		if err != nil {
			return fmt.Errorf("%w: --socket-group: %w", errUsage, err)
		}
		group, _ = strconv.Atoi(gr.Gid)
	}
	for _, l := range listens {
		if _, unix := server.SocketPath(l); !unix && token == "" {
			return fmt.Errorf("%w: --listen %s is TCP: give a token (--token-file, MSB_TOKEN)", errUsage, l)
		}
	}
	if f.e2bBase != "" && f.e2b == "" {
		return fmt.Errorf("%w: --e2b-base goes with --e2b", errUsage)
	}
	if f.e2bPause < 0 {
		return fmt.Errorf("%w: --e2b-shutdown-pause must not be negative (0: close the running E2B sandboxes at shutdown)", errUsage)
	}
	if f.e2b != "" && token == "" {
		return fmt.Errorf("%w: --e2b needs a token, the API key of the e2b SDKs (--token-file, MSB_TOKEN)", errUsage)
	}
	compactUnused := f.compactUnused
	if c := g.settings.file.CompactUnused; c != nil && !cmd.Flags().Changed("compact-unused") {
		compactUnused = *c
	}
	if compactUnused < 0 {
		return fmt.Errorf("%w: --compact-unused (compact_unused) must not be negative (0: never)", errUsage)
	}
	log := g.serveLogger(f.logJSON)
	keys, err := f.keypair(listens, log)
	if err != nil {
		return err
	}
	cfg, err := g.settings.engineConfig(o)
	if err != nil {
		return err
	}
	cfg.Logger, cfg.MaxSandboxes, cfg.DiskBudget, cfg.Lifetime, cfg.IdleTimeout = log, f.maxSandboxes, diskBudget, f.lifetime, f.idle
	cfg.GradingReserve = f.gradingReserve
	cfg.CompactUnused = compactUnused
	cfg.Spares, cfg.SparesPerInstance, cfg.SpareIdle = f.spares, f.sparesPer, f.spareIdle
	if f.gradingReserve == 0 {
		cfg.GradingReserve = -1 // the engine's 0 is its default
	}
	if memBudget > 0 {
		cfg.MemoryBudget = memBudget
	}
	e, err := engine.Open(ctx, cfg)
	if err != nil {
		return err
	}
	defer e.Close()
	if f.dataset != "" {
		d, err := f.load(e)
		if err != nil {
			return err
		}
		log.Info("dataset loaded", "path", f.dataset, "instances", len(d.Selected))
	}
	so := server.Options{Version: buildVersion().String(), Logger: log, Token: token, MaxBody: maxBody, MaxAdmissionWait: f.maxWait, OutDir: f.outDir,
		StepTimeout: f.stepTimeout, ShutdownGrace: f.grace}
	if keys != nil {
		so.TLS = keys.Config()
	}
	if f.swerex {
		sb, err := e.CreateSandbox(ctx, engine.SandboxRequest{InstanceID: f.instance, Lifetime: -1, IdleTimeout: -1,
			Labels: map[string]string{"swerex": "root"}})
		if err != nil {
			return err
		}
		so.RootSandbox = sb.ID()
		log.Info("serving one sandbox with SWE-ReX's routes at the root", "sandbox", sb.ID(), "instance", f.instance)
	}
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for _, addr := range listens {
		l, err := server.Listen(addr, group)
		if err != nil {
			return err
		}
		ls = append(ls, l)
		fmt.Fprintf(os.Stderr, "msb serve: listening on %s (pid %d, %s mode)\n", describe(l, keys), os.Getpid(), e.Mode())
	}
	waitE2B, err := serveE2B(ctx, e, e2bOptions{addr: f.e2b, base: f.e2bBase, token: token, shutdownPause: f.e2bPause, tls: keys}, log)
	if err != nil {
		return err
	}
	err = server.New(e, so).Serve(ctx, ls...)
	if err := errors.Join(err, waitE2B()); err != nil {
		return err
	}
	live := len(e.Sandboxes(nil))
	if err := e.Close(); err != nil {
		return fmt.Errorf("closing the sandboxes: %w", err)
	}
	log.Info("stopped", "sandboxes_closed", live)
	return nil
}

// defaultCompactUnused is --compact-unused's default, msb cache compact
// --unused-for's: a layer nobody used for a week pays one thaw (seconds)
// at its next use, and a daemon whose cache only grows gives back most of
// its disk on filesystems that do not compress (ext4, XFS) without an
// operator's cron.
const defaultCompactUnused = 7 * 24 * time.Hour

// e2bOptions are serve's E2B flags.
type e2bOptions struct {
	addr          string             // where to answer ("": no E2B front end)
	base          string             // the root of its base template ("": the host's directories)
	token         string             // the API key
	shutdownPause time.Duration      // the time a stop has to pause the running sandboxes (0: none)
	tls           *tlslisten.Keypair // nil: plain HTTP
}

// serveE2B serves e's E2B front end as o says until ctx ends; wait returns
// once it has stopped (and paused its running sandboxes).
func serveE2B(ctx context.Context, e *engine.Engine, o e2bOptions, log *slog.Logger) (wait func() error, err error) {
	addr, base := o.addr, o.base
	if addr == "" {
		return func() error { return nil }, nil
	}
	front := e2b.New(e, o.token, log)
	front.PauseAtShutdown(o.shutdownPause)
	if err := front.Restore(ctx); err != nil {
		return nil, fmt.Errorf("--e2b: loading the templates and paused sandboxes recorded in the cache: %w", err)
	}
	if base != "" {
		if err := front.UseBase(ctx, base); err != nil {
			return nil, fmt.Errorf("--e2b-base: %w", err)
		}
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--e2b: %w", err)
	}
	fmt.Fprintf(os.Stderr, "msb serve: E2B API on %s (set E2B_API_URL and E2B_SANDBOX_URL to it)\n", describe(l, o.tls))
	if o.tls != nil {
		l = o.tls.Listener(l)
	}
	done := make(chan error, 1)
	go func() { done <- front.Serve(ctx, l) }()
	return func() error { return <-done }, nil
}

// describe names l's URL: https with keys (which unix sockets do not use).
func describe(l net.Listener, keys *tlslisten.Keypair) string {
	if u, ok := l.Addr().(*net.UnixAddr); ok {
		return "unix://" + u.Name
	}
	if keys != nil {
		return "https://" + l.Addr().String()
	}
	return "http://" + l.Addr().String()
}

// keypair loads --tls-cert and --tls-key (nil without them), saying which
// names the certificate is for and when it expires.
func (f *serveFlags) keypair(listens []string, log *slog.Logger) (*tlslisten.Keypair, error) {
	if f.tlsCert == "" && f.tlsKey == "" {
		return nil, nil
	}
	if f.tlsCert == "" || f.tlsKey == "" {
		return nil, fmt.Errorf("%w: --tls-cert and --tls-key go together (the certificate and its private key)", errUsage)
	}
	tcp := f.e2b != ""
	for _, l := range listens {
		if _, unix := server.SocketPath(l); !unix {
			tcp = true
		}
	}
	if !tcp {
		return nil, fmt.Errorf("%w: --tls-cert is for TCP listeners (--listen host:port, --e2b, --swerex); unix sockets stay plain", errUsage)
	}
	k, err := tlslisten.Load(f.tlsCert, f.tlsKey, log)
	if errors.Is(err, tlslisten.ErrBadPair) {
		return nil, fmt.Errorf("%w: %w", errUsage, err)
	} else if err != nil {
		return nil, fmt.Errorf("%w: %w", errNoInput, err)
	}
	leaf := k.Leaf()
	log.Info("TLS on the TCP listeners", "names", tlslisten.Names(leaf), "expires", leaf.NotAfter, "cert", f.tlsCert)
	if time.Now().After(leaf.NotAfter) {
		log.Warn("TLS: the certificate has expired; clients will refuse it", "cert", f.tlsCert, "expired", leaf.NotAfter)
	}
	return k, nil
}

// token is the daemon's token: --auth-token (--swerex), --token-file, or
// MSB_TOKEN.
func (f *serveFlags) token(g *globals) (string, error) {
	if f.authToken != "" {
		return f.authToken, nil
	}
	if f.tokenFile != "" {
		b, err := os.ReadFile(f.tokenFile)
		if err != nil {
			return "", fmt.Errorf("%w: --token-file: %w", errNoInput, err)
		}
		line, _, _ := strings.Cut(string(b), "\n")
		if line = strings.TrimSpace(line); line == "" {
			return "", fmt.Errorf("%w: --token-file %s is empty", errUsage, f.tokenFile)
		}
		return line, nil
	}
	return g.env.Token, nil
}

// serveLogger logs at info level (debug with -v) to stderr.
func (g *globals) serveLogger(asJSON bool) *slog.Logger {
	level := slog.LevelInfo
	if g.verbose {
		level = slog.LevelDebug
	}
	opts := &slog.HandlerOptions{Level: level}
	if asJSON {
		return slog.New(slog.NewJSONHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts))
}
