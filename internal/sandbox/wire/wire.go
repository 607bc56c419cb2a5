// Package wire is the protocol between msb on the host and the supervisor
// inside a sandbox.
//
// The two ends share one Unix stream socket. Every message is a Frame: a
// 4-byte big-endian length followed by that many bytes of JSON or, for
// the types that have one, of a binary encoding (binary.go). The host
// sends Requests, each with a unique ID; the supervisor answers each with
// one Response carrying the same ID, in any order, so slow requests (a long
// command in one session) do not hold up others. The first message on the
// socket is the Config, sent by the host to the sandbox's init before any
// request, then a Request with OpStart; the first Response (ID 0) says
// whether the sandbox came up.
package wire

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sync"
	"sync/atomic"

	"github.com/minisandbox/msb/internal/session"
)

// MaxFrame bounds one message; file transfers larger than this are refused.
const MaxFrame = 256 << 20

// Ops a Request can name.
const (
	OpExec         = "exec"          // one-shot command in a fresh bash
	OpRun          = "run"           // argv with the sandbox's inherited stdio (msb run)
	OpShell        = "shell"         // interactive bash on a pty relayed to the inherited stdio
	OpResize       = "resize"        // window size of the OpShell pty
	OpSessionOpen  = "session.open"  // start a named persistent bash
	OpSessionExec  = "session.exec"  // run a command in it
	OpSessionClose = "session.close" // end it
	// OpSessionRename gives session Session the name To: a session
	// started ahead, taken by the client that opens the first one.
	OpSessionRename = "session.rename"
	OpReadFile      = "file.read"
	OpWriteFile     = "file.write"
	OpListDir       = "file.list"
	OpPutTar        = "file.put_tar" // unpack a tar into a directory
	OpGetTar        = "file.get_tar" // pack a file or directory as tar
	OpShutdown      = "shutdown"
	// OpStart is the frame after the Config that tells init the host has
	// put it in its cgroup; init builds the root meanwhile, and nothing of
	// the agent's runs before it.
	OpStart = "start"
	// OpRootAhead is the frame after a Config with RootAhead: the host
	// has built the root's first part (sbinit.BuildAhead) in init's mount
	// namespace, which init decoded its config beside.
	OpRootAhead = "root.ahead"
	// OpRootSelf is the frame instead of OpRootAhead when the host could
	// not start building the root's first part (it mounted nothing in
	// init's mount namespace): init builds the whole root, as without
	// RootAhead.
	OpRootSelf = "root.self"
)

// OpSessionInterrupt interrupts the commands running or waiting in a
// session as Ctrl-C would; their OpSessionExec answers with the result so
// far (timed_out). With none in flight, an interactive command waiting for
// input is interrupted and its end awaited. Response.Exit is how many
// there were.
const OpSessionInterrupt = "session.interrupt"

// Streaming an OpExec (Request.Stream): before its final Response the
// supervisor sends the command's output as it comes, each read in a
// Response with More set, the request's ID, Stream ("stdout" or "stderr")
// and Data. It keeps at most StreamWindow of them unacknowledged: the host
// sends an OpStreamAck naming the request (Ref) once it has passed a chunk
// on, and until then the supervisor stops reading the command's pipe, so a
// slow reader makes the command wait instead of anyone buffering its
// output. OpCancel (Ref) ends an OpExec, streamed or not, or an
// OpSessionExec, as its host side gave up: the command is interrupted as
// on a timeout, and the request's final Response comes once it and what it
// started are dead (a session's background jobs of earlier commands live on). Neither
// OpStreamAck nor OpCancel gets a Response of its own.
//
// Offsets: a chunk's Off is where its Data starts in the exec's output
// (stdout and stderr counted together, in the order sent), and the final
// Response of a streamed exec has Off set to the whole output's length.
// An OpStreamAck's Off is the end of what the host has passed on (the
// supervisor keeps each chunk until an acknowledgement reaches past it,
// and sends a streamed exec's final Response once its output is all
// acknowledged or the exec was cancelled: until then OpExecs lists it
// and OpAttach can send what is kept); an OpStreamAck without Off
// acknowledges one chunk.
const (
	OpStreamAck = "stream.ack"
	OpCancel    = "cancel"
)

// OpExecs and OpAttach give a restored sandbox's streaming execs to the
// new host end of its control socket (package checkpoint restores the
// supervisor with its execs in flight and their chunks unacknowledged,
// but a new socket: what the dumped one held is gone). OpExecs is the
// first request on that socket, with ID AdoptID: its Response lists the
// streaming execs in flight (Execs), each under the ID and Key of the
// request that started it, and the highest request ID the supervisor has
// seen, above which the host numbers its requests. OpAttach (Ref) has the
// supervisor send again, in order, the chunks of exec Ref that no
// acknowledgement has reached; its output goes on after them, and its
// final Response comes as any exec's. OpAttach gets no Response of its
// own.
const (
	OpExecs  = "exec.list"
	OpAttach = "exec.attach"
)

// AdoptID is the ID of the OpExecs request that opens a restored
// sandbox's socket: no request of an earlier socket had it.
const AdoptID = math.MaxUint64

// Execs answers OpExecs.
type Execs struct {
	// Last is the highest request ID the supervisor has seen.
	Last uint64 `json:"last"`
	// Streams are the streaming execs in flight.
	Streams []ExecState `json:"streams,omitempty"`
	// Binary says the supervisor reads binary frames (BinaryV1): the
	// host that adopts it may write them. One dumped by an msb before
	// the binary encoding leaves it unset.
	Binary bool `json:"binary,omitempty"`
}

// ExecState is one streaming exec in flight.
type ExecState struct {
	ID  uint64 `json:"id"`
	Key string `json:"key,omitempty"`
	// Acked is the output an acknowledgement has reached; Sent all the
	// output sent (what OpAttach sends again lies between them).
	Acked int64 `json:"acked"`
	Sent  int64 `json:"sent"`
}

// OpReset and OpResetDone put a new root under a live sandbox
// (sandbox.Sandbox.Reset): OpReset ends every process but the supervisor
// (and the shell of the Request's Session, unused, when it holds nothing
// of the old root: the Response's Data then names its pipes in
// SessionDir, one a line, which the host leaves there) and holds back
// new ones; the host then mounts the new root in the
// sandbox's mount namespace and pivots into it; OpResetDone has the
// supervisor take up the new root and lets processes start again. The
// host sends OpResetDone after every OpReset, also when the reset failed.
const (
	OpReset     = "reset"
	OpResetDone = "reset.done"
)

// OpDial connects to TCP port Port on the sandbox's loopback, from inside
// its network namespace, and passes the connected socket to the host: the
// Response has Fd set and carries the descriptor (SCM_RIGHTS) with its
// first byte. A port nothing listens on fails with CodeRefused.
const OpDial = "dial"

// StreamWindow bounds the output chunks of a streaming OpExec in flight.
const StreamWindow = 8

// Request is one call from the host.
type Request struct {
	ID      uint64               `json:"id"`
	Op      string               `json:"op"`
	Session string               `json:"session,omitempty"`
	To      string               `json:"to,omitempty"` // OpSessionRename's new name
	Path    string               `json:"path,omitempty"`
	Data    []byte               `json:"data,omitempty"`
	Mode    uint32               `json:"mode,omitempty"`
	Argv    []string             `json:"argv,omitempty"`
	Env     []string             `json:"env,omitempty"`
	Dir     string               `json:"dir,omitempty"`
	Rows    uint16               `json:"rows,omitempty"`
	Cols    uint16               `json:"cols,omitempty"`
	Limit   int64                `json:"limit,omitempty"`
	Exec    *session.ExecRequest `json:"exec,omitempty"`
	Stream  bool                 `json:"stream,omitempty"` // OpExec: send output as it comes
	Ref     uint64               `json:"ref,omitempty"`    // OpStreamAck, OpCancel: the request meant
	Owner   *FileOwner           `json:"owner,omitempty"`  // OpWriteFile: the file's owner (nil: the writer's)
	Port    int                  `json:"port,omitempty"`   // OpDial
	// Key, on a streaming OpExec, is the host's name for it, which
	// OpExecs lists (so a restored exec is known by it).
	Key string `json:"key,omitempty"`
	// Off, on OpStreamAck, is the end of the output acknowledged.
	Off int64 `json:"off,omitempty"`
	// From, on OpSessionOpen, is a session whose shell, unused, becomes
	// the new one where it can (session.Session.Adopt; the Response's
	// Exit is then 1), and is closed where it cannot.
	From string `json:"from,omitempty"`

	binary bool // decoded from a binary frame
}

// Binary says r came in a binary frame: its sender reads them.
func (r *Request) Binary() bool { return r.binary }

// FileOwner is the owner OpWriteFile gives the file it writes.
type FileOwner struct {
	UID int `json:"uid"`
	GID int `json:"gid"`
}

// Response answers the Request with the same ID.
type Response struct {
	ID      uint64          `json:"id"`
	Error   string          `json:"error,omitempty"`
	Code    string          `json:"code,omitempty"` // machine-readable error class, see Code*
	Data    []byte          `json:"data,omitempty"`
	Exit    int             `json:"exit,omitempty"`
	Entries []Entry         `json:"entries,omitempty"`
	Result  *session.Result `json:"result,omitempty"`
	Info    *Ready          `json:"info,omitempty"`
	// More marks a chunk of a streaming OpExec's output (Stream, Data);
	// the final Response follows.
	More   bool   `json:"more,omitempty"`
	Stream string `json:"stream,omitempty"`
	// Off is a chunk's offset in the exec's output, or on a streamed
	// exec's final Response the output's whole length (see OpStreamAck).
	Off int64 `json:"off,omitempty"`
	// Execs answers OpExecs.
	Execs *Execs `json:"execs,omitempty"`
	// Fd says a descriptor came with the frame (OpDial); File is it, on
	// the supervisor's side to send and on the host's as received.
	Fd   bool     `json:"fd,omitempty"`
	File *os.File `json:"-"`
}

// Error codes.
const (
	CodeNotFound      = "not_found"
	CodeExists        = "exists"
	CodeInvalid       = "invalid"
	CodeSessionEnded  = "session_ended"
	CodeEscape        = "escape" // a path tried to leave the sandbox root
	CodeTooLarge      = "too_large"
	CodeCommandFailed = "command_failed"
	CodeRefused       = "refused" // OpDial: nothing listens on the port
)

// Ready is the supervisor's first answer.
type Ready struct {
	SupervisorPid int `json:"supervisor_pid"`
	// DiskFd is the supervisor's descriptor of the sandbox's disk (see
	// Disk.Fd); 0 when it holds none.
	DiskFd int `json:"disk_fd,omitempty"`
	// Stamps are init's and the supervisor's steps until ready, in order.
	Stamps []Stamp `json:"stamps,omitempty"`
}

// Entry is one directory entry of OpListDir.
type Entry struct {
	Name    string `json:"name"`
	Type    string `json:"type"` // file, dir, symlink, other
	Size    int64  `json:"size"`
	Mode    uint32 `json:"mode"`
	Target  string `json:"target,omitempty"`
	ModTime int64  `json:"mtime"`
	UID     int    `json:"uid"` // the owner as the sandbox sees it
	GID     int    `json:"gid"`
}

// WriteFrame writes v as one frame, in the binary encoding if v's type
// has one (for a peer of this build: see binary.go), else in JSON.
func WriteFrame(w io.Writer, v any) error {
	b, err := frame(v, true)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// frame encodes v as a frame: header and body.
func frame(v any, bin bool) ([]byte, error) {
	if m, ok := v.(binaryMessage); ok && bin {
		e := enc{b: make([]byte, 5, 256)}
		e.b[4] = BinaryV1
		m.appendWire(&e)
		if len(e.b)-4 > MaxFrame {
			return nil, fmt.Errorf("frame of %d bytes exceeds %d", len(e.b)-4, MaxFrame)
		}
		binary.BigEndian.PutUint32(e.b, uint32(len(e.b)-4))
		return e.b, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encoding frame: %w", err)
	}
	if len(b) > MaxFrame {
		return nil, fmt.Errorf("frame of %d bytes exceeds %d", len(b), MaxFrame)
	}
	buf := make([]byte, 4+len(b))
	binary.BigEndian.PutUint32(buf, uint32(len(b)))
	copy(buf[4:], b)
	return buf, nil
}

// decode decodes a frame's body into v, binary or JSON by its first byte.
func decode(b []byte, v any) error {
	if len(b) == 0 || b[0] != BinaryV1 {
		return json.Unmarshal(b, v)
	}
	t, ok := v.(binaryTarget)
	if !ok {
		return fmt.Errorf("a binary frame for %T, which has no binary encoding", v)
	}
	d := dec{b: b[1:]}
	t.decodeWire(&d)
	if d.err != nil {
		return fmt.Errorf("decoding binary frame into %T: %w", v, d.err)
	}
	return nil
}

// ReadFrame reads exactly one frame into v; it never reads past the frame,
// so a reader can hand the stream to another process afterwards.
func ReadFrame(r io.Reader, v any) error {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > MaxFrame {
		return fmt.Errorf("frame of %d bytes exceeds %d", n, MaxFrame)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	return decode(b, v)
}

// Writer serializes frames from many goroutines onto one stream.
type Writer struct {
	mu   sync.Mutex // guards w
	w    io.Writer
	json atomic.Bool // write JSON even where a binary encoding exists
}

// NewWriter wraps w; it writes binary frames until SetBinary(false).
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// SetBinary says whether the peer reads binary frames (see binary.go).
func (w *Writer) SetBinary(on bool) { w.json.Store(!on) }

// Write sends v as one frame.
func (w *Writer) Write(v any) error {
	b, err := frame(v, !w.json.Load())
	if err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	_, err = w.w.Write(b)
	return err
}

// FdWriter is a stream that can send a descriptor with the first byte of
// what it writes (a Unix socket: SCM_RIGHTS).
type FdWriter interface {
	WriteFd(p []byte, fd int) (int, error)
}

// WriteFd sends v as one frame with descriptor fd, which the stream w
// wraps must pass (an FdWriter).
func (w *Writer) WriteFd(v any, fd int) error {
	fw, ok := w.w.(FdWriter)
	if !ok {
		return fmt.Errorf("sending a descriptor: the stream (%T) cannot carry one", w.w)
	}
	buf, err := frame(v, !w.json.Load())
	if err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := fw.WriteFd(buf, fd)
	if err == nil && n < len(buf) {
		_, err = w.w.Write(buf[n:])
	}
	return err
}

// FrameReader reads frames from R through a buffer: one read(2) brings
// in a frame and whatever follows it. A read that fails, say at a
// deadline, loses nothing: the next call goes on where it stopped. It may
// read past a frame, so R is its alone (ReadFrame is for a stream handed
// on afterwards).
type FrameReader struct {
	R   io.Reader
	buf []byte // buf[off:] is read and not yet returned
	off int
}

// frameReadSize is what a FrameReader asks a read for, at least.
const frameReadSize = 64 << 10

// Next reads the next frame into v.
func (fr *FrameReader) Next(v any) error {
	for {
		need := 4
		if b := fr.buf[fr.off:]; len(b) >= 4 {
			n := binary.BigEndian.Uint32(b)
			if n > MaxFrame {
				return fmt.Errorf("frame of %d bytes exceeds %d", n, MaxFrame)
			}
			if len(b)-4 >= int(n) {
				fr.off += 4 + int(n)
				return decode(b[4:4+n], v)
			}
			need = 4 + int(n)
		}
		fr.reserve(need)
		k, err := fr.R.Read(fr.buf[len(fr.buf):cap(fr.buf)])
		fr.buf = fr.buf[:len(fr.buf)+k]
		if err == io.EOF && len(fr.buf) > 0 {
			err = io.ErrUnexpectedEOF
		}
		if err != nil && k == 0 {
			return err
		}
	}
}

// reserve moves what is left to the front of the buffer and makes room
// for need bytes; a buffer grown for a large frame is let go of.
func (fr *FrameReader) reserve(need int) {
	left := fr.buf[fr.off:]
	size := max(need, frameReadSize)
	if cap(fr.buf) < need || cap(fr.buf) > 4*frameReadSize && size == frameReadSize {
		nb := make([]byte, len(left), size)
		copy(nb, left)
		fr.buf, fr.off = nb, 0
		return
	}
	n := copy(fr.buf[:cap(fr.buf)], left)
	fr.buf, fr.off = fr.buf[:n], 0
}
