package e2b

import (
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"mime/multipart"
	"net/http"
	"path"
	"slices"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/engine"
	"github.com/minisandbox/msb/internal/sandbox"
	"github.com/minisandbox/msb/internal/server/e2b/envd/filesystem"
	"github.com/minisandbox/msb/internal/server/e2b/envd/filesystem/filesystemconnect"
)

// homeDir is where relative paths start, as E2B's default user's home
// (/home/user) does; a sandbox of the base template also starts its
// commands there, with HOME set to it, as E2B's base does.
const homeDir = "/home/user"

// maxFile caps a file read or written through /files.
const maxFile = 64 << 20

// filesystemService is filesystem.Filesystem over the engine's file calls.
type filesystemService struct {
	filesystemconnect.UnimplementedFilesystemHandler
	f *Front
}

func abs(p string) string {
	if !path.IsAbs(p) {
		p = path.Join(homeDir, p)
	}
	return path.Clean(p)
}

func entryInfo(p string, e api.FileEntry) *filesystem.EntryInfo {
	info := &filesystem.EntryInfo{Name: path.Base(p), Path: p, Size: e.Size, Mode: e.Mode & 0o7777,
		Permissions: fs.FileMode(e.Mode & 0o777).String(), ModifiedTime: timestamppb.New(time.Unix(e.ModTime, 0))}
	switch e.Type {
	case "file":
		info.Type = filesystem.FileType_FILE_TYPE_FILE
	case "dir":
		info.Type = filesystem.FileType_FILE_TYPE_DIRECTORY
		info.Permissions = "d" + info.Permissions[1:]
	case "symlink":
		info.Type, info.IsSymlink = filesystem.FileType_FILE_TYPE_SYMLINK, true
		info.SymlinkTarget = &e.Target
	}
	return info
}

func (s *filesystemService) stat(ctx context.Context, sb *engine.Sandbox, p string) (*filesystem.EntryInfo, error) {
	e, err := sb.Stat(ctx, p)
	if err != nil {
		return nil, connectError(err)
	}
	info := entryInfo(p, e)
	idsOf(ctx, sb).own(info, e)
	if e.Type == "symlink" {
		followLink(ctx, sb, p, info)
	}
	return info, nil
}

// maxLinks bounds a chain of symlinks followLink follows, as the kernel's
// (40) does.
const maxLinks = 40

// followLink gives the entry of the symlink p what envd's gives it: the
// type of what the link leads to and that path, absolute (envd resolves it
// with filepath.EvalSymlinks). A dangling link stays a symlink.
func followLink(ctx context.Context, sb *engine.Sandbox, p string, info *filesystem.EntryInfo) {
	target := p
	for range maxLinks {
		e, err := sb.Stat(ctx, target)
		if err != nil {
			return
		}
		switch e.Type {
		case "symlink":
			if next := e.Target; path.IsAbs(next) {
				target = path.Clean(next)
			} else {
				target = path.Join(path.Dir(target), next)
			}
			continue
		case "dir":
			info.Type = filesystem.FileType_FILE_TYPE_DIRECTORY
		default:
			info.Type = filesystem.FileType_FILE_TYPE_FILE
		}
		info.SymlinkTarget = &target
		return
	}
}

func (s *filesystemService) Stat(ctx context.Context, req *connect.Request[filesystem.StatRequest]) (*connect.Response[filesystem.StatResponse], error) {
	_, sb, err := s.f.sandboxOf(ctx)
	if err != nil {
		return nil, connectError(err)
	}
	info, err := s.stat(ctx, sb, abs(req.Msg.GetPath()))
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&filesystem.StatResponse{Entry: info}), nil
}

func (s *filesystemService) ListDir(ctx context.Context, req *connect.Request[filesystem.ListDirRequest]) (*connect.Response[filesystem.ListDirResponse], error) {
	_, sb, err := s.f.sandboxOf(ctx)
	if err != nil {
		return nil, connectError(err)
	}
	depth := max(req.Msg.GetDepth(), 1)
	out := &filesystem.ListDirResponse{}
	if err := s.walk(ctx, sb, idsOf(ctx, sb), abs(req.Msg.GetPath()), depth, out); err != nil {
		return nil, err
	}
	return connect.NewResponse(out), nil
}

// walk appends dir's entries, and theirs down to depth levels, in the
// order of E2B's envd (a walk of the tree in lexical order: each directory
// followed by its entries).
func (s *filesystemService) walk(ctx context.Context, sb *engine.Sandbox, n ids, dir string, depth uint32, out *filesystem.ListDirResponse) error {
	ents, err := sb.ListDir(ctx, dir)
	if err != nil {
		return connectError(err)
	}
	slices.SortFunc(ents, func(a, b api.FileEntry) int { return strings.Compare(a.Name, b.Name) })
	for _, e := range ents {
		p := path.Join(dir, e.Name)
		info := entryInfo(p, e)
		n.own(info, e)
		if e.Type == "symlink" {
			followLink(ctx, sb, p, info)
		}
		out.Entries = append(out.Entries, info)
		if e.Type == "dir" && depth > 1 {
			if err := s.walk(ctx, sb, n, p, depth-1, out); err != nil {
				return err
			}
		}
	}
	return nil
}

// run runs argv in the sandbox, failing with its output unless it exits 0.
func run(ctx context.Context, sb *engine.Sandbox, argv ...string) error {
	return runAs(ctx, sb, nil, argv...)
}

// runAs is run as u (nil: the sandbox's user).
func runAs(ctx context.Context, sb *engine.Sandbox, u *sysUser, argv ...string) error {
	cmd := ""
	for _, a := range argv {
		cmd += shellWord(a) + " "
	}
	res, err := sb.Exec(ctx, api.ExecRequest{Command: asUser(u, cmd)})
	if err != nil {
		return connectError(err)
	}
	if res.ExitCode != 0 {
		return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("%s: %s", argv[0], res.Stdout))
	}
	return nil
}

func (s *filesystemService) MakeDir(ctx context.Context, req *connect.Request[filesystem.MakeDirRequest]) (*connect.Response[filesystem.MakeDirResponse], error) {
	b, sb, err := s.f.sandboxOf(ctx)
	if err != nil {
		return nil, connectError(err)
	}
	defer b.changing()()
	p := abs(req.Msg.GetPath())
	if _, err := sb.Stat(ctx, p); err == nil {
		return nil, connect.NewError(connect.CodeAlreadyExists, fmt.Errorf("%s already exists", p))
	}
	u, err := s.f.userOf(ctx, b, sb, rpcUser(req.Header()))
	if err != nil {
		return nil, userError(err)
	}
	if err := runAs(ctx, sb, u, "mkdir", "-p", "--", p); err != nil {
		return nil, err
	}
	info, err := s.stat(ctx, sb, p)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&filesystem.MakeDirResponse{Entry: info}), nil
}

func (s *filesystemService) Move(ctx context.Context, req *connect.Request[filesystem.MoveRequest]) (*connect.Response[filesystem.MoveResponse], error) {
	b, sb, err := s.f.sandboxOf(ctx)
	if err != nil {
		return nil, connectError(err)
	}
	defer b.changing()()
	src, dst := abs(req.Msg.GetSource()), abs(req.Msg.GetDestination())
	if _, err := s.stat(ctx, sb, src); err != nil {
		return nil, err
	}
	u, err := s.f.userOf(ctx, b, sb, rpcUser(req.Header()))
	if err != nil {
		return nil, userError(err)
	}
	if err := runAs(ctx, sb, u, "mv", "-T", "--", src, dst); err != nil {
		return nil, err
	}
	info, err := s.stat(ctx, sb, dst)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&filesystem.MoveResponse{Entry: info}), nil
}

func (s *filesystemService) Remove(ctx context.Context, req *connect.Request[filesystem.RemoveRequest]) (*connect.Response[filesystem.RemoveResponse], error) {
	b, sb, err := s.f.sandboxOf(ctx)
	if err != nil {
		return nil, connectError(err)
	}
	defer b.changing()()
	// As envd's (os.RemoveAll), removing what is not there succeeds.
	u, err := s.f.userOf(ctx, b, sb, rpcUser(req.Header()))
	if err != nil {
		return nil, userError(err)
	}
	if err := runAs(ctx, sb, u, "rm", "-rf", "--", abs(req.Msg.GetPath())); err != nil {
		return nil, err
	}
	return connect.NewResponse(&filesystem.RemoveResponse{}), nil
}

func (f *Front) download(w http.ResponseWriter, r *http.Request) {
	b, sb, err := f.sandboxOf(r.Context())
	if err != nil {
		engineError(w, err)
		return
	}
	if _, err := f.userOf(r.Context(), b, sb, r.URL.Query().Get("username")); err != nil {
		filesUserError(w, err)
		return
	}
	data, err := sb.ReadFile(r.Context(), abs(r.URL.Query().Get("path")), maxFile)
	if err != nil {
		engineError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Write(data)
}

// partPath is the file name a form part carries, whole: the SDKs send the
// file's path there, which multipart.Part.FileName cuts to its last element.
func partPath(part *multipart.Part) string {
	_, params, err := mime.ParseMediaType(part.Header.Get("Content-Disposition"))
	if err != nil {
		return part.FileName()
	}
	return params["filename"]
}

// upload writes a file from an octet-stream body (path in the query) or
// each part of a multipart form (path in the query, else the part's file
// name), and answers the entries written.
func (f *Front) upload(w http.ResponseWriter, r *http.Request) {
	b, sb, err := f.sandboxOf(r.Context())
	if err != nil {
		engineError(w, err)
		return
	}
	defer b.changing()()
	u, err := f.userOf(r.Context(), b, sb, r.URL.Query().Get("username"))
	if err != nil {
		filesUserError(w, err)
		return
	}
	target := r.URL.Query().Get("path")
	var written []map[string]string
	write := func(p string, body io.Reader) error {
		data, err := io.ReadAll(io.LimitReader(body, maxFile+1))
		if err != nil {
			return fmt.Errorf("reading the upload: %w", err)
		}
		if len(data) > maxFile {
			return fmt.Errorf("%w: the file is over %d bytes", sandbox.ErrTooLarge, maxFile)
		}
		p = abs(p)
		made := missingDirs(r.Context(), sb, u, path.Dir(p))
		if err := writeAs(r.Context(), sb, u, p, data); err != nil {
			return err
		}
		if err := chown(r.Context(), sb, u, made...); err != nil {
			return err
		}
		written = append(written, map[string]string{"name": path.Base(p), "type": "file", "path": p})
		return nil
	}
	mt, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt == "multipart/form-data" {
		mr := multipart.NewReader(r.Body, params["boundary"])
		for {
			part, err := mr.NextPart()
			if err == io.EOF {
				break
			}
			if err != nil {
				engineError(w, fmt.Errorf("%w: reading the form: %v", engine.ErrBadRequest, err))
				return
			}
			p := target
			if p == "" {
				p = partPath(part)
			}
			if err := write(p, part); err != nil {
				engineError(w, err)
				return
			}
		}
	} else {
		body := io.Reader(r.Body)
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				engineError(w, fmt.Errorf("%w: gzip body: %v", engine.ErrBadRequest, err))
				return
			}
			body = zr
		}
		if err := write(target, body); err != nil {
			engineError(w, err)
			return
		}
	}
	writeJSON(w, http.StatusOK, written)
}
