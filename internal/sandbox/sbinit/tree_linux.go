package sbinit

import (
	"context"
	"errors"
	"io"
	"os"
	"strconv"
)

// StageTree writes a sandbox's writable layer, the directory open on
// TreeFd, to stdout as a store tree stream (WriteTree). The host starts it
// in the user namespace of a rootless sandbox whose user is not root (see
// sandbox.Sandbox.OpenWritable): there, as the namespace's root, it reads
// the files the sandbox's user made private, which the host, as the
// caller, may not, and it sees their owners as the sandbox does.
const StageTree = "tree"

// TreeFd is the writable layer's descriptor in the tree stage.
const TreeFd = 3

// WriteTree is store.WriteTree in the binaries that take snapshots, those
// that hold an engine: package engine sets it, and package sandbox starts
// its own binary for the tree stage. msb-sandbox and the lean msb leave it
// nil: the store (its compression, its HTTP transfer) would double the size
// of the binary every sandbox starts twice, and its package inits would
// run at every msb run.
var WriteTree func(ctx context.Context, w io.Writer, dir string) error

// errNoTreeStage: this binary (msb-sandbox, the lean msb) has no tree stage.
var errNoTreeStage = errors.New("this binary has no tree stage: a binary that holds an engine (msb-full, the daemon) serves it")

func treeMain() error {
	if WriteTree == nil {
		return errNoTreeStage
	}
	// "/." makes the walk's first lstat follow the descriptor's magic link.
	return WriteTree(context.Background(), os.Stdout, "/proc/self/fd/"+strconv.Itoa(TreeFd)+"/.")
}
