package sbinit

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"testing"

	"github.com/minisandbox/msb/internal/sandbox/wire"
)

// TestCtlWriterFollowsConfig: the supervisor's first frame, the ready
// answer, is in the encoding its config came in. A daemon of an msb
// before the binary encoding, still running when msb-sandbox beside it
// is replaced (an upgrade), sends its config as JSON and decodes only
// JSON: it reads the ready answer. A host of this msb gets it binary.
func TestCtlWriterFollowsConfig(t *testing.T) {
	ready := wire.Response{Info: &wire.Ready{SupervisorPid: 7, Stamps: []wire.Stamp{{Step: "x", Mono: 1}}}}

	// The older host: its config framed as it framed everything.
	body, err := json.Marshal(wire.Config{ID: "old", Lowers: []string{"/l"}})
	if err != nil {
		t.Fatal(err)
	}
	var sock bytes.Buffer
	binary.Write(&sock, binary.BigEndian, uint32(len(body)))
	sock.Write(body)
	var cfg wire.Config
	if err := wire.ReadFrame(&sock, &cfg); err != nil || cfg.ID != "old" {
		t.Fatalf("reading a JSON config: %v (%+v)", err, cfg)
	}
	var out bytes.Buffer
	if err := ctlWriter(&out, &cfg).Write(ready); err != nil {
		t.Fatal(err)
	}
	var old wire.Response // as the older host decodes it
	if err := json.Unmarshal(out.Bytes()[4:], &old); err != nil || old.Info == nil || old.Info.SupervisorPid != 7 {
		t.Fatalf("an older host cannot read the ready answer to its JSON config: %v (% x)", err, out.Bytes()[:min(out.Len(), 8)])
	}

	// This msb's host.
	sock.Reset()
	if err := wire.WriteFrame(&sock, wire.Config{ID: "new"}); err != nil {
		t.Fatal(err)
	}
	cfg = wire.Config{}
	if err := wire.ReadFrame(&sock, &cfg); err != nil || cfg.ID != "new" {
		t.Fatalf("reading a binary config: %v (%+v)", err, cfg)
	}
	out.Reset()
	if err := ctlWriter(&out, &cfg).Write(ready); err != nil {
		t.Fatal(err)
	}
	if b := out.Bytes(); len(b) < 5 || b[4] != wire.BinaryV1 {
		t.Fatalf("the ready answer to a binary config is not binary: % x", b[:min(len(b), 8)])
	}
}
