package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"

	"github.com/minisandbox/msb/internal/sandbox/sbinit"
)

// MapsSubIDs reports whether the sandbox's user namespace maps the
// caller's subordinate ids (a rootless sandbox whose user is not root; see
// docs/images.md): its writable layer then holds files of ids that are not
// the caller's, which the caller may be unable to read. OpenWritable reads
// them.
func (s *Sandbox) MapsSubIDs() bool { return s.rt.rootless && s.conf.User != (User{}) }

// OpenWritable streams the sandbox's writable layer as a store tree stream
// (store.WriteTree): msb's tree stage (sbinit.StageTree), started in the
// sandbox's user namespace, walks it as that namespace's root, so it reads
// the files the sandbox's user made private and records the owners the
// sandbox sees (its user's 1000, not the host's subordinate id). A Go
// process cannot join a user namespace (setns(2) wants a single-threaded
// caller), so nsenter(1) joins it and executes this binary's stage. The
// sandbox should be frozen while the stream is read. Close the reader: it
// waits for the stage and, when the stage failed, says why.
func (s *Sandbox) OpenWritable(ctx context.Context) (io.ReadCloser, error) {
	if sbinit.WriteTree == nil {
		return nil, fmt.Errorf("reading the writable layer of sandbox %s: this binary has no tree stage (a binary that links package engine has)", s.ID)
	}
	dir, err := s.WritableDir()
	if err != nil {
		return nil, err
	}
	cmd, err := nsStage(ctx, s.InitPid(), sbinit.StageTree)
	if err != nil {
		return nil, fmt.Errorf("reading the writable layer of sandbox %s in its user namespace: %w", s.ID, err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("opening the writable layer of sandbox %s: %w", s.ID, err)
	}
	defer d.Close()                // the stage holds its own copy
	cmd.ExtraFiles = []*os.File{d} // sbinit.TreeFd
	r := &treeReader{id: s.ID, cmd: cmd}
	cmd.Stderr = &r.stderr
	if r.out, err = cmd.StdoutPipe(); err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("reading the writable layer of sandbox %s in its user namespace: %w", s.ID, err)
	}
	return r, nil
}

// treeReader is the tree stage's output.
type treeReader struct {
	id     string
	cmd    *exec.Cmd
	out    io.ReadCloser
	stderr bytes.Buffer
}

func (r *treeReader) Read(p []byte) (int, error) { return r.out.Read(p) }

// Close stops reading (a stage still writing then fails) and waits for
// the stage.
func (r *treeReader) Close() error {
	r.out.Close()
	if err := r.cmd.Wait(); err != nil {
		return fmt.Errorf("reading the writable layer of sandbox %s in its user namespace: %w", r.id, stageErr(err, &r.stderr))
	}
	return nil
}
