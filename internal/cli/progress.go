//go:build !msblean

package cli

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/minisandbox/msb/internal/api"
	"github.com/minisandbox/msb/internal/engine"
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
	p.say(fmt.Sprintf("[%d/%d] %s", p.done, p.total, line), line, important)
	if p.bar != nil {
		p.bar.Add(1)
	}
}

// advance moves the bar n steps on, saying nothing (a part of a step that
// is announced by note, or by a later step).
func (p *progress) advance(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar != nil && n > 0 {
		p.bar.Add(n)
	}
}

// note says line on its own when not on a terminal, and above the bar
// when important; it counts no step.
func (p *progress) note(line string, important bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.say(line, line, important)
}

// say writes plain (no terminal) or, when important, barLine above the
// bar. Callers hold mu.
func (p *progress) say(plain, barLine string, important bool) {
	switch {
	case p.quiet:
	case p.bar == nil:
		fmt.Fprintln(os.Stderr, plain)
	case important:
		p.bar.Clear()
		fmt.Fprintln(os.Stderr, barLine)
	}
}

// grow raises the number of steps to total (a job that found more work).
func (p *progress) grow(total int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if total <= p.total {
		return
	}
	p.total = total
	if p.bar != nil {
		p.bar.ChangeMax(total)
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

// buildProgress shows the build steps of a job (engine.BuildEvent) on a
// progress: the phases under way in the bar's description, and each
// finished phase as a line when stderr is not a terminal, so a build of
// minutes is never silent. With phaseSteps (cache build, whose steps are
// instances) each finished phase also moves the bar, an instance being
// len(engine.BuildPhases) steps of it.
type buildProgress struct {
	prog       *progress
	what       string // the description when nothing builds
	phaseSteps bool

	mu       sync.Mutex     // guards the fields below
	active   map[string]int // instances in each phase
	advanced map[string]int // bar steps moved for an instance's phases
	finished int            // instances finished (phaseSteps)
	total    int
}

func newBuildProgress(p *progress, what string) *buildProgress {
	return &buildProgress{prog: p, what: what, active: map[string]int{}, advanced: map[string]int{}}
}

// event handles one build event; it is safe for concurrent use.
func (b *buildProgress) event(ev engine.BuildEvent) {
	if ev.Finished != nil {
		b.finish(*ev.Finished)
		return
	}
	b.mu.Lock()
	if ev.PhaseDone {
		b.active[ev.Phase]--
	} else {
		b.active[ev.Phase]++
	}
	var parts []string
	for _, ph := range engine.BuildPhases {
		if n := b.active[ph]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", ph, n))
		}
	}
	move := 0
	if ev.PhaseDone && b.phaseSteps && b.advanced[ev.InstanceID] < len(engine.BuildPhases)-1 {
		b.advanced[ev.InstanceID]++
		move = 1
	}
	b.mu.Unlock()
	desc := b.what
	if len(parts) > 0 {
		desc += " (building: " + strings.Join(parts, ", ") + ")"
	}
	b.prog.describe(desc)
	b.prog.advance(move)
	if ev.PhaseDone {
		b.prog.note(fmt.Sprintf("%s: %s done in %s", ev.InstanceID, ev.Phase, FormatDuration(ev.Elapsed)), false)
	}
}

// finish records a finished instance of a cache build.
func (b *buildProgress) finish(r api.BuildResult) {
	b.mu.Lock()
	b.finished++
	n := b.finished
	rest := len(engine.BuildPhases) - b.advanced[r.InstanceID]
	delete(b.advanced, r.InstanceID)
	b.mu.Unlock()
	line := fmt.Sprintf("%s: %s %s", r.InstanceID, r.Status, firstLine(r.Error))
	b.prog.note(fmt.Sprintf("[%d/%d] %s", n, b.total, line), r.Status == api.BuildFailed)
	b.prog.advance(rest)
}
