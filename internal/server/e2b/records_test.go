package e2b

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/engine"
)

func testRecords(t *testing.T) *records {
	t.Helper()
	return &records{dir: stateDir(t.TempDir())}
}

func pausedRec(id, token string) record {
	return record{Paused: &pausedRecord{ID: id, Template: "base", Token: token, User: "user",
		Metadata: map[string]string{"run": "r1"}, Envs: map[string]string{"A": "1"},
		Started: time.Unix(1700000000, 0).UTC(), End: time.Unix(1700000300, 0).UTC(), Snapshot: pausePrefix + id,
		Network: engine.NetworkFiltered, Policy: &engine.NetPolicy{Allow: []string{"127.0.0.1:80"}, Deny: []string{allTraffic}},
		Traffic: "traffic-" + token, Mask: "custom-host.example.com:${PORT}", HTTPS: []int{8443}}}
}

// TestRecordsRoundTrip: what put writes, load reads back, by id; remove
// takes it away, and removing what is not there is no error.
func TestRecordsRoundTrip(t *testing.T) {
	s := testRecords(t)
	tpl := record{Template: &templateRecord{ID: "tpl1", Name: "n", Tags: []string{"v1"}, Upload: "u",
		Build:  buildRecord{ID: "b", Created: time.Unix(1700000000, 0).UTC(), Snapshot: templatePrefix + "tpl1-b"},
		Config: templateConfig{Env: []string{"A=1"}, Workdir: "/w", User: "user", Start: "sleep 1"}}}
	if err := s.put(kindTemplate, "tpl1", func() record { return tpl }); err != nil {
		t.Fatal(err)
	}
	if err := s.put(kindPaused, "sb1", func() record { return pausedRec("sb1", "tok") }); err != nil {
		t.Fatal(err)
	}
	snap := record{Snapshot: &snapshotRecord{Name: "my-snap:v1", Sandbox: "sb1", User: "user"}}
	if err := s.put(kindSnapshot, "my-snap:v1", func() record { return snap }); err != nil {
		t.Fatal(err)
	}
	snaps, err := s.load(kindSnapshot)
	snap.Version = recordVersion
	if err != nil || !reflect.DeepEqual(snaps, map[string]record{"my-snap:v1": snap}) {
		t.Errorf("snapshots loaded: %v %v, want %+v", snaps, err, snap.Snapshot)
	}
	tpls, err := s.load(kindTemplate)
	if err != nil {
		t.Fatal(err)
	}
	tpl.Version = recordVersion
	if !reflect.DeepEqual(tpls, map[string]record{"tpl1": tpl}) {
		t.Errorf("templates loaded: %+v, want %+v", tpls["tpl1"].Template, tpl.Template)
	}
	paused, err := s.load(kindPaused)
	if err != nil {
		t.Fatal(err)
	}
	want := pausedRec("sb1", "tok")
	want.Version = recordVersion
	if !reflect.DeepEqual(paused, map[string]record{"sb1": want}) {
		t.Errorf("paused loaded: %+v, want %+v", paused["sb1"].Paused, want.Paused)
	}
	for range 2 {
		if err := s.remove(kindPaused, "sb1"); err != nil {
			t.Fatal(err)
		}
	}
	if paused, err := s.load(kindPaused); err != nil || len(paused) != 0 {
		t.Errorf("after remove: %v %v, want no records", paused, err)
	}
}

// TestRecordsTornWrite: a write killed before its rename leaves its temp
// file beside the old record; load reads the old record and removes the
// temp file.
func TestRecordsTornWrite(t *testing.T) {
	s := testRecords(t)
	if err := s.put(kindPaused, "sb1", func() record { return pausedRec("sb1", "old") }); err != nil {
		t.Fatal(err)
	}
	p := s.path(kindPaused, "sb1")
	whole, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	torn := filepath.Join(filepath.Dir(p), recordTemp+"sb1.json-0badc0ffee00")
	if err := os.WriteFile(torn, whole[:len(whole)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	paused, err := s.load(kindPaused)
	if err != nil {
		t.Fatal(err)
	}
	if got := paused["sb1"].Paused; got == nil || got.Token != "old" || len(paused) != 1 {
		t.Errorf("loaded %v beside a torn write, want the old record alone", paused)
	}
	if _, err := os.Stat(torn); !os.IsNotExist(err) {
		t.Errorf("the torn temp file is still there after load: %v", err)
	}
}

// TestRecordsRefused: a record of another version, one that is not
// JSON (a file cut short by something else than msb) and one whose id is
// not its file's are refused with an error that names the file and what
// to do.
func TestRecordsRefused(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		want       error
		says       string
	}{
		{"version 2", `{"version": 2, "paused": {"id": "sb1"}}`, ErrRecordVersion, "is version 2, this msb reads version 1"},
		{"no version", `{"paused": {"id": "sb1"}}`, ErrRecordVersion, "is version 0"},
		{"cut short", `{"version": 1, "paused": {"id": "s`, ErrBadRecord, "remove it"},
		{"another id", `{"version": 1, "paused": {"id": "sb2"}}`, ErrBadRecord, "holds no paused sandbox of id sb1"},
		{"another kind", `{"version": 1, "template": {"id": "sb1"}}`, ErrBadRecord, "holds no paused sandbox of id sb1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := testRecords(t)
			p := s.path(kindPaused, "sb1")
			if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(tc.data), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := s.load(kindPaused)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("load: %v; want %v naming %s and saying %q", err, tc.want, p, tc.says)
			}
		})
	}
}
