// Package client talks to msb serve's native API (/v1): the CLI's client
// verbs (msb sandbox, exec, session, cp) and Go programs use it.
//
// A Client holds the daemon's address (a unix socket, or http://host:port
// with a token) and one method per route, taking and returning the types
// of package api. An error the daemon answered is an *Error carrying the
// status and the api.ErrorInfo; test its code with IsCode.
package client

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/socketdir"
)

// Client is a connection to one daemon. It is safe for concurrent use.
type Client struct {
	base  string // http://host:port, or http://msb for a unix socket
	token string
	hc    *http.Client
}

// New connects to addr: unix:///path/msb.sock (or a path), or
// http://host:port (host:port alone is taken as http). token is sent as a
// bearer token when not empty.
func New(addr, token string) (*Client, error) {
	c := &Client{token: token}
	tr := &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 0, DisableCompression: true}
	switch {
	case strings.HasPrefix(addr, "unix://"), strings.HasPrefix(addr, "/"), strings.HasPrefix(addr, "./"):
		path := strings.TrimPrefix(addr, "unix://")
		if err := socketdir.Check(filepath.Dir(path), os.Geteuid()); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("daemon socket %s: %w", path, err)
		}
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		}
		c.base = "http://msb"
	case strings.HasPrefix(addr, "http://"), strings.HasPrefix(addr, "https://"):
		c.base = strings.TrimRight(addr, "/")
	case addr != "":
		c.base = "http://" + addr
	default:
		return nil, errors.New("no daemon address")
	}
	c.hc = &http.Client{Transport: tr}
	return c, nil
}

// TrustRoots makes the client verify an https daemon's certificate
// against roots instead of the system's (msb's verbs take other roots from
// SSL_CERT_FILE or SSL_CERT_DIR, as Go does on Linux).
func (c *Client) TrustRoots(roots *x509.CertPool) {
	if tr, ok := c.hc.Transport.(*http.Transport); ok {
		tr.TLSClientConfig = &tls.Config{RootCAs: roots}
	}
}

// Close drops the client's idle connections.
func (c *Client) Close() { c.hc.CloseIdleConnections() }

// Error is an error answer of the daemon.
type Error struct {
	Status int
	Info   api.ErrorInfo
}

func (e *Error) Error() string { return fmt.Sprintf("%s (%s)", e.Info.Message, e.Info.Code) }

// IsCode reports whether err is an answer of the daemon with code.
func IsCode(err error, code api.ErrorCode) bool {
	var e *Error
	return errors.As(err, &e) && e.Info.Code == code
}

// statusCodes is, for each status the daemon answers errors with, its
// broadest code (the Python client's _BY_STATUS names the same).
var statusCodes = map[int]api.ErrorCode{
	http.StatusBadRequest:            api.CodeBadRequest,
	http.StatusUnauthorized:          api.CodeUnauthorized,
	http.StatusNotFound:              api.CodeNotFound,
	http.StatusMethodNotAllowed:      api.CodeMethodNotAllowed,
	http.StatusConflict:              api.CodeConflict,
	http.StatusGone:                  api.CodeGone,
	http.StatusRequestEntityTooLarge: api.CodeBodyTooLarge,
	http.StatusTooManyRequests:       api.CodeQuotaExceeded,
	http.StatusInternalServerError:   api.CodeInternal,
	http.StatusServiceUnavailable:    api.CodeUnavailable,
	http.StatusInsufficientStorage:   api.CodeTooLarge,
}

// CodeOfStatus is the code of an error answer whose body is not the
// API's (a proxy's, say): its status's broadest code, else internal.
func CodeOfStatus(status int) api.ErrorCode {
	if c, ok := statusCodes[status]; ok {
		return c
	}
	return api.CodeInternal
}

func (c *Client) request(ctx context.Context, method, path string, q url.Values, body io.Reader, ctype string) (*http.Response, error) {
	u := c.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, err
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("msb serve at %s: %w", strings.TrimPrefix(c.base, "http://"), err)
	}
	if resp.StatusCode >= 400 {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		var eb api.ErrorBody
		if json.Unmarshal(b, &eb) != nil || eb.Error.Code == "" {
			eb.Error = api.ErrorInfo{Code: CodeOfStatus(resp.StatusCode), Message: fmt.Sprintf("%s: %s", resp.Status, strings.TrimSpace(string(b)))}
		}
		return nil, &Error{Status: resp.StatusCode, Info: eb.Error}
	}
	return resp, nil
}

// call sends in as JSON (nil: no body) and decodes the answer into out
// (nil: discarded).
func (c *Client) call(ctx context.Context, method, path string, q url.Values, in, out any) error {
	var body io.Reader
	ctype := ""
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body, ctype = bytes.NewReader(b), "application/json"
	}
	resp, err := c.request(ctx, method, path, q, body, ctype)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		return err
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("decoding the answer to %s %s: %w", method, path, err)
	}
	return nil
}

func sb(id string, rest ...string) string {
	return "/v1/sandboxes/" + url.PathEscape(id) + strings.Join(rest, "")
}

// Health is GET /v1/health.
func (c *Client) Health(ctx context.Context) (api.Health, error) {
	var h api.Health
	return h, c.call(ctx, "GET", "/v1/health", nil, nil, &h)
}

// CreateSandbox creates a sandbox.
func (c *Client) CreateSandbox(ctx context.Context, req api.CreateSandboxRequest) (api.SandboxInfo, error) {
	var out api.SandboxInfo
	return out, c.call(ctx, "POST", "/v1/sandboxes", nil, req, &out)
}

// Sandboxes lists live sandboxes whose labels include every one of match.
func (c *Client) Sandboxes(ctx context.Context, match map[string]string) ([]api.SandboxInfo, error) {
	q := url.Values{}
	for k, v := range match {
		q.Add("label", k+"="+v)
	}
	var out api.SandboxList
	return out.Sandboxes, c.call(ctx, "GET", "/v1/sandboxes", q, nil, &out)
}

// Sandbox describes a sandbox, live or closed recently.
func (c *Client) Sandbox(ctx context.Context, id string) (api.SandboxInfo, error) {
	var out api.SandboxInfo
	return out, c.call(ctx, "GET", sb(id), nil, nil, &out)
}

// DeleteSandbox closes a sandbox.
func (c *Client) DeleteSandbox(ctx context.Context, id string) (api.SandboxInfo, error) {
	var out api.SandboxInfo
	return out, c.call(ctx, "DELETE", sb(id), nil, nil, &out)
}

// Exec runs a command (req.Session empty: in a fresh bash).
func (c *Client) Exec(ctx context.Context, id string, req api.ExecRequest) (api.ExecResult, error) {
	var out api.ExecResult
	if req.Session != "" {
		name := req.Session
		req.Session = ""
		return out, c.call(ctx, "POST", sb(id, "/sessions/", url.PathEscape(name), "/exec"), nil, req, &out)
	}
	return out, c.call(ctx, "POST", sb(id, "/exec"), nil, req, &out)
}

// ExecStream runs a one-shot command, handing its output events to emit
// as they come, and returns the result.
func (c *Client) ExecStream(ctx context.Context, id string, req api.ExecRequest, emit func(api.ExecEvent)) (api.ExecResult, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return api.ExecResult{}, err
	}
	resp, err := c.request(ctx, "POST", sb(id, "/exec/stream"), nil, bytes.NewReader(b), "application/json")
	if err != nil {
		return api.ExecResult{}, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 256<<20)
	for sc.Scan() {
		var ev api.ExecEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return api.ExecResult{}, fmt.Errorf("decoding an exec event: %w", err)
		}
		switch ev.Type {
		case api.EventResult:
			if ev.Result == nil {
				return api.ExecResult{}, errors.New("a result event without a result")
			}
			return *ev.Result, nil
		case api.EventError:
			if ev.Error == nil {
				return api.ExecResult{}, errors.New("an error event without an error")
			}
			return api.ExecResult{}, &Error{Status: http.StatusOK, Info: *ev.Error}
		default:
			emit(ev)
		}
	}
	if err := sc.Err(); err != nil {
		return api.ExecResult{}, err
	}
	return api.ExecResult{}, errors.New("the stream ended without a result")
}

// OpenSession starts a persistent shell.
func (c *Client) OpenSession(ctx context.Context, id string, req api.SessionRequest) error {
	return c.call(ctx, "POST", sb(id, "/sessions"), nil, req, nil)
}

// Sessions lists a sandbox's sessions.
func (c *Client) Sessions(ctx context.Context, id string) ([]string, error) {
	var out api.SessionList
	return out.Sessions, c.call(ctx, "GET", sb(id, "/sessions"), nil, nil, &out)
}

// InterruptSession interrupts the command running in a session.
func (c *Client) InterruptSession(ctx context.Context, id, name string) (bool, error) {
	var out api.InterruptResult
	return out.Interrupted, c.call(ctx, "POST", sb(id, "/sessions/", url.PathEscape(name), "/interrupt"), nil, nil, &out)
}

// CloseSession ends a session.
func (c *Client) CloseSession(ctx context.Context, id, name string) error {
	return c.call(ctx, "DELETE", sb(id, "/sessions/", url.PathEscape(name)), nil, nil, nil)
}

func pathQ(p string) url.Values { return url.Values{"path": {p}} }

// ReadFile reads a file inside the sandbox.
func (c *Client) ReadFile(ctx context.Context, id, path string) ([]byte, error) {
	resp, err := c.request(ctx, "GET", sb(id, "/files"), pathQ(path), nil, "")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

// WriteFile writes a file inside the sandbox (mode 0: 0644).
func (c *Client) WriteFile(ctx context.Context, id, path string, data []byte, mode uint32) error {
	q := pathQ(path)
	if mode != 0 {
		q.Set("mode", strconv.FormatUint(uint64(mode), 8))
	}
	resp, err := c.request(ctx, "PUT", sb(id, "/files"), q, bytes.NewReader(data), "application/octet-stream")
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

// Stat describes a path inside the sandbox.
func (c *Client) Stat(ctx context.Context, id, path string) (api.FileEntry, error) {
	var out api.FileEntry
	return out, c.call(ctx, "GET", sb(id, "/files/stat"), pathQ(path), nil, &out)
}

// ListDir lists a directory inside the sandbox.
func (c *Client) ListDir(ctx context.Context, id, path string) ([]api.FileEntry, error) {
	var out api.FileList
	return out.Entries, c.call(ctx, "GET", sb(id, "/files/list"), pathQ(path), nil, &out)
}

// GetTar packs a file or directory inside the sandbox.
func (c *Client) GetTar(ctx context.Context, id, path string) ([]byte, error) {
	resp, err := c.request(ctx, "GET", sb(id, "/files/tar"), pathQ(path), nil, "")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

// PutTar unpacks a tar into a directory inside the sandbox.
func (c *Client) PutTar(ctx context.Context, id, dir string, tarball []byte) error {
	resp, err := c.request(ctx, "PUT", sb(id, "/files/tar"), pathQ(dir), bytes.NewReader(tarball), "application/x-tar")
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

// Diff is the agent's patch.
func (c *Client) Diff(ctx context.Context, id string) (string, error) {
	var out api.Diff
	return out.Patch, c.call(ctx, "GET", sb(id, "/diff"), nil, nil, &out)
}

// Evaluate grades a patch (default the sandbox's diff) in a fresh sandbox.
func (c *Client) Evaluate(ctx context.Context, id string, req api.EvaluateRequest) (api.EvaluateResponse, error) {
	var out api.EvaluateResponse
	return out, c.call(ctx, "POST", sb(id, "/evaluate"), nil, req, &out)
}

// Call is any other route: in as the JSON body (nil: none), the answer
// decoded into out.
func (c *Client) Call(ctx context.Context, method, path string, in, out any) error {
	return c.call(ctx, method, path, nil, in, out)
}
