package cli

import (
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// progress shows how a long job advances, on stderr: a bar on a terminal
// (github.com/schollz/progressbar), plain lines otherwise, so that files
// and pipes get no carriage returns or escapes. It is safe for concurrent
// use.
type progress struct {
	mu    sync.Mutex // guards the fields below and writes to stderr
	bar   *progressbar.ProgressBar
	plain bool
	quiet bool
	total int
	done  int
}

// newProgress starts a display of total steps named what. quiet shows
// nothing (--json keeps stderr for errors).
func newProgress(what string, total int, quiet bool) *progress {
	p := &progress{total: total, quiet: quiet, plain: !term.IsTerminal(int(os.Stderr.Fd()))}
	if quiet || p.plain {
		return p
	}
	p.bar = progressbar.NewOptions(total, progressbar.OptionSetWriter(os.Stderr), progressbar.OptionSetDescription(what),
		progressbar.OptionShowCount(), progressbar.OptionSetWidth(30), progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionSetPredictTime(true), progressbar.OptionClearOnFinish(), progressbar.OptionFullWidth())
	return p
}

// describe changes the bar's description (what is going on now).
func (p *progress) describe(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar != nil {
		p.bar.Describe(s)
	}
}

// step records one finished step; line says what finished, printed as its
// own line when not on a terminal, or above the bar when important.
func (p *progress) step(line string, important bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done++
	switch {
	case p.quiet:
	case p.bar == nil:
		fmt.Fprintf(os.Stderr, "[%d/%d] %s\n", p.done, p.total, line)
	default:
		if important {
			p.bar.Clear()
			fmt.Fprintln(os.Stderr, line)
		}
		p.bar.Add(1)
	}
}

// stop removes the bar.
func (p *progress) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar != nil {
		p.bar.Finish()
		p.bar = nil
	}
}
