package e2b

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/atomicfile"
	"github.com/minisandbox/msb/internal/engine"
)

// buildTimeout bounds one template build.
const buildTimeout = time.Hour

// maxUpload bounds one uploaded COPY archive.
const maxUpload = 1 << 30

// uploadPrefix starts the path of the URLs COPY archives are uploaded to
// (without the API key, as the SDK sends them: a token in the URL instead).
const uploadPrefix = "/e2b-uploads/"

// filesHash is the SDK's hash of a COPY step's files (SHA-256, hex).
var filesHash = regexp.MustCompile(`^[0-9a-f]{64}$`)

// buildSpec is the body of POST /v2/templates/{t}/builds/{b} (E2B's
// TemplateBuildStartV2).
type buildSpec struct {
	FromImage         string          `json:"fromImage"`
	FromTemplate      string          `json:"fromTemplate"`
	FromImageRegistry json.RawMessage `json:"fromImageRegistry"`
	Steps             []buildStep     `json:"steps"`
	StartCmd          string          `json:"startCmd"`
	ReadyCmd          string          `json:"readyCmd"`
}

// buildStep is one step: RUN, ENV, WORKDIR, USER or COPY.
type buildStep struct {
	Type      string   `json:"type"`
	Args      []string `json:"args"`
	FilesHash string   `json:"filesHash"`
}

// ErrBadStep: a build step msb does not know or cannot carry out as given.
var ErrBadStep = errors.New("unsupported template build step")

// check refuses what a build cannot do before it starts: unknown steps,
// registry credentials.
func (s buildSpec) check() error {
	if len(s.FromImageRegistry) > 0 && string(s.FromImageRegistry) != "null" {
		return fmt.Errorf("%w: fromImageRegistry: msb pulls no images; import %q with msb cache import-image", ErrBadStep, s.FromImage)
	}
	for i, st := range s.Steps {
		need := map[string]int{"RUN": 1, "ENV": 2, "WORKDIR": 1, "USER": 1, "COPY": 2}[st.Type]
		switch {
		case need == 0:
			return fmt.Errorf("%w: step %d: %s (msb builds RUN, ENV, WORKDIR, USER and COPY)", ErrBadStep, i+1, st.Type)
		case len(st.Args) < need || st.Type == "ENV" && len(st.Args)%2 != 0:
			return fmt.Errorf("%w: step %d: %s with arguments %q", ErrBadStep, i+1, st.Type, st.Args)
		case st.Type == "COPY" && !filesHash.MatchString(st.FilesHash):
			return fmt.Errorf("%w: step %d: COPY without a filesHash", ErrBadStep, i+1)
		}
	}
	return nil
}

// filesDir is where uploaded COPY archives are kept, by files hash.
func (f *Front) filesDir() string { return filepath.Join(f.e.Cache().Dir(), "e2b-files") }

// fileLink is GET /templates/{template}/files/{hash}: whether the archive
// of a COPY step is here, and where to upload it.
func (f *Front) fileLink(w http.ResponseWriter, r *http.Request) {
	t := f.templateByRef(r.PathValue("template"))
	hash := r.PathValue("hash")
	if t == nil {
		apiError(w, api.CodeNotFound, "template '%s' not found", r.PathValue("template"))
		return
	}
	if !filesHash.MatchString(hash) {
		apiError(w, api.CodeBadRequest, "files hash %q is not a SHA-256 in hex", hash)
		return
	}
	_, err := os.Stat(filepath.Join(f.filesDir(), hash))
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	writeJSON(w, http.StatusCreated, map[string]any{"present": err == nil,
		"url": scheme + "://" + r.Host + uploadPrefix + t.id + "/" + hash + "?token=" + t.upload})
}

// uploadFiles is PUT /e2b-uploads/{template}/{hash}?token=: a COPY
// step's archive (a tar, gzipped or not), kept by hash.
func (f *Front) uploadFiles(w http.ResponseWriter, r *http.Request) {
	if f.uploadOK(r.PathValue("template"), r.URL.Query().Get("token")) == nil {
		apiError(w, api.CodeUnauthorized, "wrong upload URL: ask GET /templates/{template}/files/{hash} for one")
		return
	}
	hash := r.PathValue("hash")
	if !filesHash.MatchString(hash) {
		apiError(w, api.CodeBadRequest, "files hash %q is not a SHA-256 in hex", hash)
		return
	}
	if err := f.keepUpload(hash, http.MaxBytesReader(w, r.Body, maxUpload)); err != nil {
		engineError(w, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (f *Front) keepUpload(hash string, body io.Reader) error {
	opts := atomicfile.Options{Perm: 0o600, DirPerm: 0o700, TempPattern: ".upload-*", NoSync: true}
	err := atomicfile.WriteFrom(filepath.Join(f.filesDir(), hash), opts, func(tmp *os.File) error {
		_, err := io.Copy(tmp, body)
		return err
	})
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return fmt.Errorf("%w: an upload above %d bytes", engine.ErrBadRequest, int64(maxUpload))
	case err != nil:
		return fmt.Errorf("keeping an upload: %w", err)
	}
	return nil
}

// startBuild is POST /v2/templates/{template}/builds/{build}: it checks
// the steps and runs them in the background; the SDK polls buildStatus.
func (f *Front) startBuild(w http.ResponseWriter, r *http.Request) {
	t, b := f.buildOf(w, r)
	if b == nil {
		return
	}
	var spec buildSpec
	if err := decode(r, &spec); err != nil {
		engineError(w, err)
		return
	}
	if err := spec.check(); err != nil {
		apiError(w, api.CodeBadRequest, "%v", err)
		return
	}
	b.mu.Lock()
	started := b.status != "waiting"
	b.status = "building"
	b.mu.Unlock()
	if started {
		apiError(w, api.CodeConflict, "build %s was started already", b.id)
		return
	}
	go f.runBuild(t, b, spec)
	w.WriteHeader(http.StatusAccepted)
}

// runBuild runs spec's steps in a build sandbox and keeps what they wrote
// as the snapshot of b.
func (f *Front) runBuild(t *template, b *build, spec buildSpec) {
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	sr, conf, err := f.buildBase(spec)
	if err != nil {
		b.finish("", conf, "base", err)
		return
	}
	b.logf("info", "base", "FROM %s", describeBase(spec))
	sr.Network, sr.Lifetime, sr.IdleTimeout = f.e.BuildNetworkMode(), -1, -1
	sr.Labels = api.Map[string, string]{"e2b-build": t.id}
	sb, err := f.e.CreateSandbox(ctx, sr)
	if err != nil {
		b.finish("", conf, "base", fmt.Errorf("starting the build sandbox: %w", err))
		return
	}
	defer f.e.CloseSandbox(sb.ID())
	f.addUser(ctx, sb, b, sr)
	for i, st := range spec.Steps {
		step := strconv.Itoa(i + 1)
		b.logf("info", step, "[%d/%d] %s %s", i+1, len(spec.Steps), st.Type, strings.TrimSpace(strings.Join(st.Args, " ")))
		if err := f.runStep(ctx, sb, b, step, st, &conf); err != nil {
			b.finish("", conf, step, fmt.Errorf("step %s (%s): %w", step, st.Type, err))
			return
		}
	}
	if spec.StartCmd != "" || spec.ReadyCmd != "" {
		b.logf("info", "finalize", "start command: %q, ready command: %q", spec.StartCmd, spec.ReadyCmd)
		if err := f.buildExec(ctx, sb, b, "finalize", &conf, conf.User, startScript,
			"MSB_E2B_START="+spec.StartCmd, "MSB_E2B_READY="+spec.ReadyCmd, fmt.Sprintf("MSB_E2B_TRIES=%d", readyTries)); err != nil {
			b.finish("", conf, "finalize", fmt.Errorf("start command: %w", err))
			return
		}
		conf.Start = spec.StartCmd
	}
	name := templatePrefix + t.id + "-" + b.id[:8]
	_, err = f.e.Snapshot(ctx, sb.ID(), api.SnapshotRequest{Name: name})
	if err == nil { // a named snapshot answers before it is durable
		err = f.e.WaitSnapshot(ctx, name)
	}
	if err != nil {
		b.finish("", conf, "finalize", fmt.Errorf("keeping the build: %w", err))
		return
	}
	b.finish(name, conf, "", nil)
	t.mu.Lock()
	t.done = b
	t.mu.Unlock()
	f.saveTemplate(t)
}

func describeBase(spec buildSpec) string {
	if spec.FromTemplate != "" {
		return "template " + spec.FromTemplate
	}
	if spec.FromImage == "" {
		return baseTemplate
	}
	return spec.FromImage
}

// buildBase is the build sandbox's root and the config it starts with:
// the base template (the SDK's default image e2bdev/base is it too), a
// template built here, a named snapshot, or an image the cache holds.
func (f *Front) buildBase(spec buildSpec) (engine.SandboxRequest, templateConfig, error) {
	from := spec.FromTemplate
	if from == "" && (spec.FromImage == "" || strings.HasPrefix(spec.FromImage, "e2bdev/base")) {
		from = baseTemplate
	}
	switch {
	case from == baseTemplate: // E2B's base starts in its user's home, as its user, as sandboxes of base do
		return engine.SandboxRequest{HostBase: f.base == "", Image: f.base, Workdir: homeDir, Sudo: f.sudoPath()},
			templateConfig{Workdir: homeDir, Env: []string{"HOME=" + homeDir}, User: f.baseUser}, nil
	case from != "":
		if t := f.templateByRef(from); t != nil {
			snap, conf, ok := t.ready()
			if !ok {
				return engine.SandboxRequest{}, templateConfig{}, fmt.Errorf("FROM template %s: %w", from, ErrNotReady)
			}
			return engine.SandboxRequest{Image: "snapshot/" + snap}, conf, nil
		}
		return engine.SandboxRequest{Image: "snapshot/" + from}, templateConfig{}, f.hasRoot("snapshot/"+from, "template "+from,
			"a template is base, one built here or an msb snapshot")
	}
	return engine.SandboxRequest{Image: spec.FromImage}, templateConfig{}, f.hasRoot(spec.FromImage, "image "+spec.FromImage,
		"import it with `msb cache import-image "+spec.FromImage+"` (msb pulls no images)")
}

// hasRoot checks that the cache holds the root name, saying what to do
// when it does not.
func (f *Front) hasRoot(name, what, hint string) error {
	ir, err := f.e.Cache().ImageRoot(context.Background(), name)
	if errors.Is(err, engine.ErrNotFound) {
		return fmt.Errorf("FROM %s: msb's cache does not hold it: %s: %w", what, hint, ErrNoBase)
	}
	if err != nil {
		return fmt.Errorf("FROM %s: %w", what, err)
	}
	ir.Lease.Release()
	return nil
}

// runStep carries out one step in the build sandbox, recording ENV,
// WORKDIR and USER in conf.
func (f *Front) runStep(ctx context.Context, sb *engine.Sandbox, b *build, step string, st buildStep, conf *templateConfig) error {
	switch st.Type {
	case "ENV":
		for i := 0; i+1 < len(st.Args); i += 2 {
			conf.Env = setEnv(conf.Env, st.Args[i], st.Args[i+1])
		}
		return nil
	case "USER":
		conf.User = st.Args[0]
		return nil
	case "WORKDIR":
		dir := within(conf.Workdir, st.Args[0])
		if err := f.buildExec(ctx, sb, b, step, conf, "", `mkdir -p -- "$MSB_E2B_DIR"`, "MSB_E2B_DIR="+dir); err != nil {
			return err
		}
		conf.Workdir = dir
		return nil
	case "RUN":
		user := conf.User
		if len(st.Args) > 1 && st.Args[1] != "" {
			user = st.Args[1]
		}
		return f.buildExec(ctx, sb, b, step, conf, user, st.Args[0])
	case "COPY":
		return f.copyStep(ctx, sb, b, step, st, conf)
	}
	return fmt.Errorf("%w: %s", ErrBadStep, st.Type)
}

// within is p against the working directory dir ("/" when unset).
func within(dir, p string) string {
	if path.IsAbs(p) {
		return p
	}
	if dir == "" {
		dir = "/"
	}
	return path.Join(dir, p)
}

// setEnv sets name in env (NAME=value entries), replacing an earlier one.
func setEnv(env []string, name, value string) []string {
	env = slices.DeleteFunc(slices.Clone(env), func(e string) bool { return strings.HasPrefix(e, name+"=") })
	return append(env, name+"="+value)
}

// buildExec runs cmd in the build sandbox with the build's environment and
// working directory, as user when one is set (asUser: the build sandbox
// runs as root), and logs its output; a non-zero exit is an error.
func (f *Front) buildExec(ctx context.Context, sb *engine.Sandbox, b *build, step string, conf *templateConfig, user, cmd string, env ...string) error {
	req := api.ExecRequest{Command: cmd, Cwd: conf.Workdir, Env: append(slices.Clone(conf.Env), env...)}
	if user != "" {
		u, err := lookupUser(ctx, sb, user)
		if err != nil {
			return err
		}
		req.Command = asUser(u, cmd)
	}
	res, err := sb.Exec(ctx, req)
	if err != nil {
		return err
	}
	for _, line := range strings.Split(strings.TrimRight(res.Stdout, "\n"), "\n") {
		if line != "" {
			b.logf("info", step, "%s", line)
		}
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("%w: the command exited with code %d", ErrStepFailed, res.ExitCode)
	}
	return nil
}

// readyTries is how many times, a second apart, a build runs its ready
// command before it gives up on the start command.
const readyTries = 300

// startScript starts a template's start command (if any) in the build
// sandbox and waits until its ready command (if any) succeeds, as E2B does
// at the end of a build. The start command's output is shown when it never
// gets ready; what it wrote stays in the template.
const startScript = `log=/tmp/.msb-e2b-start.log
: >"$log"
if [ -n "$MSB_E2B_START" ]; then /bin/bash -l -c "$MSB_E2B_START" >"$log" 2>&1 </dev/null & fi
ok=0
if [ -z "$MSB_E2B_READY" ]; then ok=1; fi
for _ in $(seq "$MSB_E2B_TRIES"); do
  [ "$ok" = 1 ] && break
  if /bin/bash -l -c "$MSB_E2B_READY" >/dev/null 2>&1 </dev/null; then ok=1; else sleep 1; fi
done
if [ "$ok" = 0 ]; then echo "the ready command never succeeded: $MSB_E2B_READY"; tail -n 20 "$log"; fi
rm -f "$log"
[ "$ok" = 1 ]`

// ErrNoBase: a build's FROM names a root the cache does not hold.
var ErrNoBase = errors.New("no such base")

// ErrStepFailed: a build step's command failed.
var ErrStepFailed = errors.New("build step failed")

// copyScript copies the staged files matching $MSB_E2B_SRC to
// $MSB_E2B_DEST as Docker's COPY does (a directory's contents, a file
// into a directory or to a path; several files into a directory), then
// sets owner and mode if given.
const copyScript = `set -e; shopt -s nullglob dotglob
cd "$MSB_E2B_STAGE"; d="$MSB_E2B_DEST"
set -- $MSB_E2B_SRC
if [ "$#" = 0 ]; then echo "COPY: nothing matches $MSB_E2B_SRC" >&2; exit 1; fi
for s in "$@"; do
  if [ -d "$s" ]; then mkdir -p "$d"; cp -a "$s"/. "$d"/; t="$d"
  elif [ "$#" -gt 1 ] || [ "${d%/}" != "$d" ] || [ -d "$d" ]; then mkdir -p "$d"; cp -a "$s" "$d"/; t="${d%/}/$(basename "$s")"
  else mkdir -p "$(dirname "$d")"; cp -a "$s" "$d"; t="$d"; fi
  if [ -n "$MSB_E2B_OWNER" ]; then chown -R "$MSB_E2B_OWNER" "$t"; fi
  if [ -n "$MSB_E2B_MODE" ]; then chmod -R "$MSB_E2B_MODE" "$t"; fi
done
cd /; rm -rf "$MSB_E2B_STAGE"`

// copyStep unpacks the step's uploaded archive in a staging directory of
// the build sandbox, then copies what its source names to its destination.
func (f *Front) copyStep(ctx context.Context, sb *engine.Sandbox, b *build, step string, st buildStep, conf *templateConfig) error {
	data, err := os.ReadFile(filepath.Join(f.filesDir(), st.FilesHash))
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w: the files of %s were not uploaded", ErrBadStep, st.Args[0])
	}
	if err != nil {
		return fmt.Errorf("reading the files of %s: %w", st.Args[0], err)
	}
	if bytes.HasPrefix(data, []byte{0x1f, 0x8b}) {
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return fmt.Errorf("%w: the archive of %s: %v", ErrBadStep, st.Args[0], err)
		}
		if data, err = io.ReadAll(zr); err != nil {
			return fmt.Errorf("%w: the archive of %s: %v", ErrBadStep, st.Args[0], err)
		}
	}
	stage := "/tmp/.msb-e2b-copy-" + st.FilesHash[:16]
	if err := f.buildExec(ctx, sb, b, step, &templateConfig{}, "", `mkdir -p -- "$MSB_E2B_STAGE"`, "MSB_E2B_STAGE="+stage); err != nil {
		return err
	}
	if err := sb.PutTar(ctx, stage, data); err != nil {
		return fmt.Errorf("unpacking the files of %s: %w", st.Args[0], err)
	}
	dest := within(conf.Workdir, st.Args[1])
	if strings.HasSuffix(st.Args[1], "/") && !strings.HasSuffix(dest, "/") {
		dest += "/"
	}
	env := []string{"MSB_E2B_STAGE=" + stage, "MSB_E2B_SRC=" + st.Args[0], "MSB_E2B_DEST=" + dest,
		"MSB_E2B_OWNER=" + arg(st.Args, 2), "MSB_E2B_MODE=" + arg(st.Args, 3)}
	return f.buildExec(ctx, sb, b, step, &templateConfig{}, "", copyScript, env...)
}

func arg(args []string, i int) string {
	if i < len(args) {
		return args[i]
	}
	return ""
}
