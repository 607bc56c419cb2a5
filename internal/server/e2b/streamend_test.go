package e2b

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"testing"
	"time"
)

// rawStart sends a Start of cmd (commands.run's form) to c's sandbox over
// HTTP/1.1 by hand and returns what each read of the connection got, up to
// the response's last chunk.
func rawStart(t *testing.T, c envdClient, cmd string) [][]byte {
	t.Helper()
	u, err := url.Parse(c.url)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := json.Marshal(map[string]any{"process": map[string]any{"cmd": "/bin/bash", "args": []string{"-l", "-c", cmd}}})
	if err != nil {
		t.Fatal(err)
	}
	body := binary.BigEndian.AppendUint32([]byte{0}, uint32(len(msg)))
	body = append(body, msg...)
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(time.Minute))
	fmt.Fprintf(conn, "POST /process.Process/Start HTTP/1.1\r\nHost: %s\r\nContent-Type: application/connect+json\r\n"+
		"Connect-Protocol-Version: 1\r\nE2b-Sandbox-Id: %s\r\nX-Access-Token: %s\r\nContent-Length: %d\r\n\r\n%s",
		u.Host, c.id, c.token, len(body), body)
	var reads [][]byte
	var all []byte
	buf := make([]byte, 1<<16)
	for !bytes.HasSuffix(all, []byte("\r\n0\r\n\r\n")) {
		n, err := conn.Read(buf)
		if n > 0 {
			reads = append(reads, bytes.Clone(buf[:n]))
			all = append(all, buf[:n]...)
		}
		if err != nil {
			t.Fatalf("%s: reading the response: %v; got %q", cmd, err, all)
		}
	}
	return reads
}

// TestE2BStreamEndOneWrite: a process's end event, connect's end of the
// stream and HTTP's last chunk leave in one write (endWriter), which the
// client reads at once, where each used to be flushed by itself; the
// events before the end are flushed as they come (a background command's
// client waits for its start event).
func TestE2BStreamEndOneWrite(t *testing.T) {
	c := createSandbox(t, startFront(t))
	for _, cmd := range []string{"true", "true", "echo one; sleep 0.5; echo two; sleep 0.5"} { // the second true in a primed shell
		reads := rawStart(t, c, cmd)
		last := reads[len(reads)-1]
		if !bytes.Contains(last, []byte(`"end":`)) {
			t.Errorf("%s: the last read %q has no end event: the end was written apart from the stream's end (reads %q)", cmd, last, reads)
		}
		if bytes.Count(bytes.Join(reads, nil), []byte(`"end":`)) != 1 {
			t.Errorf("%s: not one end event in %q", cmd, reads)
		}
		if cmd != "true" {
			if len(reads) < 3 || !bytes.Contains(reads[0], []byte(`"start":`)) || bytes.Contains(reads[0], []byte("two")) {
				t.Errorf("%s: reads %q: want the start event and the output as they came, before the end", cmd, reads)
			}
		}
	}
}
