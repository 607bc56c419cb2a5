package bench

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// pipeShell is a bash reading commands from a pipe, the way the paper's
// runtime (and any pexpect-style harness) drives its shell: each command
// is followed by a printf of its status, and the reply is read up to that
// line. Output and errors share one pipe.
type pipeShell struct {
	timeout time.Duration // of each command (default commandTimeout)
	cmd     *exec.Cmd
	in      *os.File
	out     *os.File
	rd      *bufio.Reader
	mark    string // starts the status line after each command; random per shell
	done    chan struct{}
}

// startPipeShell starts cmd (which must end up in bash reading stdin)
// with its stdin, stdout and stderr on pipes.
func startPipeShell(cmd *exec.Cmd) (*pipeShell, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, outW
	err = cmd.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, fmt.Errorf("starting %s: %w", cmd.Path, err)
	}
	var nonce [8]byte
	rand.Read(nonce[:])
	p := &pipeShell{cmd: cmd, in: inW, out: outR, rd: bufio.NewReader(outR), done: make(chan struct{}),
		mark: "__msb_bench_" + hex.EncodeToString(nonce[:]) + "="}
	go func() { cmd.Wait(); close(p.done) }()
	return p, nil
}

// run sends command and waits for its status; it fails unless the status
// is 0.
func (p *pipeShell) run(ctx context.Context, command string) error {
	timeout := p.timeout
	if timeout == 0 {
		timeout = commandTimeout
	}
	deadline := time.Now().Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	p.out.SetReadDeadline(deadline)
	if _, err := fmt.Fprintf(p.in, "{ %s\n} </dev/null 2>&1\nprintf '\\n%s%%d\\n' $?\n", command, p.mark); err != nil {
		return fmt.Errorf("writing to the shell: %w (%s)", err, p.exitNote())
	}
	var out strings.Builder
	for {
		line, err := p.rd.ReadString('\n')
		if rest, ok := strings.CutPrefix(line, p.mark); ok {
			code, _ := strconv.Atoi(strings.TrimSpace(rest))
			if code != 0 {
				return exitError(code, out.String())
			}
			return nil
		}
		out.WriteString(line)
		if err != nil {
			return fmt.Errorf("reading from the shell: %w (%s); it wrote: %s", err, p.exitNote(), strings.TrimSpace(out.String()))
		}
	}
}

func (p *pipeShell) exitNote() string {
	select {
	case <-p.done:
		return "shell exited: " + p.cmd.ProcessState.String()
	case <-time.After(100 * time.Millisecond):
		return "shell still running"
	}
}

// close ends the shell by closing its stdin and waits for it to exit,
// killing it after a few seconds.
func (p *pipeShell) close() error {
	p.in.Close()
	var err error
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
		err = errors.New("shell did not exit on end of input; killed")
	}
	p.out.Close()
	return err
}

func (p *pipeShell) pid() int { return p.cmd.Process.Pid }
