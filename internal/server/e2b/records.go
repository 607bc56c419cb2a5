package e2b

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/minisandbox/msb/internal/atomicfile"
	"github.com/minisandbox/msb/internal/engine"
)

// A record is what the front end keeps of one template, one paused
// sandbox or one named snapshot (create_snapshot) in the cache, so that a restarted daemon knows it again: one
// JSON file, <cache>/e2b-state/<kind>/<id>.json, written whole to a temp
// file that is synced and then renamed over the old one (the directory
// synced after), so a write killed halfway leaves the old record or the
// new one. The files a record names (a template's build, a paused
// sandbox's files) are named snapshots in the store, which gc keeps while
// their refs exist. docs/e2b.md "After a restart" describes the format.

// recordVersion is the version of the records this msb writes and reads;
// a record of another version is refused, never guessed at.
const recordVersion = 1

// Record kinds: the directory of each under the state directory.
const (
	kindTemplate = "templates"
	kindPaused   = "paused"
	kindSnapshot = "snapshots"
)

// kindNouns name what a record of each kind holds, for errors.
var kindNouns = map[string]string{kindTemplate: "template", kindPaused: "paused sandbox", kindSnapshot: "snapshot's sandbox and user"}

// recordTemp starts the names of records being written; a file of that
// name is what a killed write left, and loading removes it.
const recordTemp = ".tmp-"

// Record errors; test with errors.Is.
var (
	// ErrRecordVersion: a record was written by an msb of another record
	// format.
	ErrRecordVersion = errors.New("e2b record of an unknown version")
	// ErrBadRecord: a record is not one this msb wrote (not JSON, or its
	// id or kind does not match its file).
	ErrBadRecord = errors.New("e2b record unreadable")
)

// record is the JSON of one file: its version and one of the kinds.
type record struct {
	Version  int             `json:"version"`
	Template *templateRecord `json:"template,omitempty"`
	Paused   *pausedRecord   `json:"paused,omitempty"`
	Snapshot *snapshotRecord `json:"snapshot,omitempty"`
}

// templateRecord is a template and its ready build: what create(name),
// Template.exists, get_tags and the alias lookup ask for.
type templateRecord struct {
	ID     string         `json:"id"`
	Name   string         `json:"name"`
	Tags   []string       `json:"tags,omitempty"`
	Upload string         `json:"upload"` // the token of its upload URLs
	Build  buildRecord    `json:"build"`
	Config templateConfig `json:"config"`
}

// buildRecord is a template's ready build.
type buildRecord struct {
	ID       string    `json:"id"`
	Created  time.Time `json:"created"`
	Snapshot string    `json:"snapshot"`
}

// pausedRecord is a paused sandbox: what list, get, connect and kill
// need of it, and what its resumed sandbox starts with.
type pausedRecord struct {
	ID       string            `json:"id"`
	Template string            `json:"template"`
	Token    string            `json:"token"` // its envd access token, kept across the resume
	User     string            `json:"user,omitempty"`
	Metadata map[string]string `json:"metadata,omitempty"`
	Envs     map[string]string `json:"envs,omitempty"`
	Started  time.Time         `json:"started"`
	End      time.Time         `json:"end"`
	Snapshot string            `json:"snapshot"` // the pause snapshot it resumes from
	// Processes says the snapshot holds its processes too (a CRIU dump
	// the engine keeps with it), which the resume restores; else
	// FilesOnly says why it does not (pauseSnapshot).
	Processes bool   `json:"processes,omitempty"`
	FilesOnly string `json:"filesOnly,omitempty"`
	// Instance is the msb instance of a task sandbox ("": a raw one,
	// resumed on its snapshot as an image with its network).
	Instance string            `json:"instance,omitempty"`
	Network  string            `json:"network,omitempty"`
	Policy   *engine.NetPolicy `json:"policy,omitempty"`
	// Lifecycle is what its timeout does once resumed, and whether an
	// envd call resumes it (nil: killed at the timeout).
	Lifecycle *lifecycle `json:"lifecycle,omitempty"`
	// ShutdownAt is when a daemon's shutdown paused it (shutdown.go);
	// zero: a pause its client or its timeout asked for.
	ShutdownAt time.Time `json:"shutdownAt,omitzero"`
	// Traffic is its traffic access token ("": public URLs; ingress.go).
	Traffic string `json:"traffic,omitempty"`
	// Mask is its maskRequestHost ("": none; ingress.go).
	Mask string `json:"mask,omitempty"`
	// HTTPS are its httpsPorts (ingress.go).
	HTTPS []int `json:"https,omitempty"`
	// Procs are the processes of the process API its pause kept
	// (Processes), which the resume gives back to it (pause.go).
	Procs []procRecord `json:"procs,omitempty"`
}

// snapshotRecord is what create_snapshot knows of a named snapshot
// besides the engine: the E2B sandbox it was taken of (list_snapshots'
// sandboxID filter) and that sandbox's default user (the default user of
// sandboxes created from it).
type snapshotRecord struct {
	Name    string `json:"name"`
	Sandbox string `json:"sandbox"`
	User    string `json:"user,omitempty"`
}

// records is the record store of one cache.
type records struct {
	dir string     // <cache>/e2b-state
	mu  sync.Mutex // serializes writes, so the last one asked is the one kept
}

// stateDir is where a cache keeps the front end's records.
func stateDir(cache string) string { return filepath.Join(cache, "e2b-state") }

func (s *records) path(kind, id string) string { return filepath.Join(s.dir, kind, id+".json") }

// put writes the record make returns (called with the store's lock held,
// so a later change is written after an earlier one) as kind/id.
func (s *records) put(kind, id string, make func() record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec := make()
	rec.Version = recordVersion
	data, err := json.MarshalIndent(rec, "", " ")
	if err != nil {
		return fmt.Errorf("encoding the e2b record %s/%s: %w", kind, id, err)
	}
	p := s.path(kind, id)
	opts := atomicfile.Options{Perm: 0o600, DirPerm: 0o700, TempPattern: recordTemp + filepath.Base(p) + "-*"}
	if err := atomicfile.Write(p, append(data, '\n'), opts); err != nil {
		return fmt.Errorf("writing the e2b record: %w", err)
	}
	return nil
}

// remove deletes kind/id; a record that is not there is no error.
func (s *records) remove(kind, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.path(kind, id)
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing the e2b record %s: %w", p, err)
	}
	return atomicfile.SyncDir(filepath.Dir(p))
}

// load reads every record of kind, by id, removing what killed writes
// left. A record it cannot read stops it with an error that names the
// file and what to do.
func (s *records) load(kind string) (map[string]record, error) {
	dir := filepath.Join(s.dir, kind)
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the e2b records: %w", err)
	}
	out := map[string]record{}
	for _, e := range ents {
		name := e.Name()
		if strings.HasPrefix(name, recordTemp) {
			os.Remove(filepath.Join(dir, name)) // a write that did not finish: the record it was replacing stands
			continue
		}
		id, ok := strings.CutSuffix(name, ".json")
		if !ok || e.IsDir() {
			continue
		}
		rec, err := readRecord(filepath.Join(dir, name), kind, id)
		if err != nil {
			return nil, err
		}
		out[id] = rec
	}
	return out, nil
}

// readRecord reads and checks the record of kind and id at p.
func readRecord(p, kind, id string) (record, error) {
	data, err := os.ReadFile(p)
	if err != nil {
		return record{}, fmt.Errorf("reading the e2b record: %w", err)
	}
	var head struct {
		Version int `json:"version"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return record{}, fmt.Errorf("%w: %s: %v; msb writes records whole, so this file was changed by something else: remove it, and msb forgets that %s",
			ErrBadRecord, p, err, kindNouns[kind])
	}
	if head.Version != recordVersion {
		return record{}, fmt.Errorf("%w: %s is version %d, this msb reads version %d: run the msb that wrote it, or remove the file and msb forgets that %s",
			ErrRecordVersion, p, head.Version, recordVersion, kindNouns[kind])
	}
	var rec record
	if err := json.Unmarshal(data, &rec); err != nil {
		return record{}, fmt.Errorf("%w: %s: %v", ErrBadRecord, p, err)
	}
	got := ""
	switch {
	case kind == kindTemplate && rec.Template != nil:
		got = rec.Template.ID
	case kind == kindPaused && rec.Paused != nil:
		got = rec.Paused.ID
	case kind == kindSnapshot && rec.Snapshot != nil:
		got = rec.Snapshot.Name
	}
	if got != id {
		return record{}, fmt.Errorf("%w: %s holds no %s of id %s: remove the file", ErrBadRecord, p, kindNouns[kind], id)
	}
	return rec, nil
}
