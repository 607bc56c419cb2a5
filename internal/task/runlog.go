package task

import (
	"fmt"
	"strings"
	"sync"
	"time"
)

// RunLog is an evaluation's run_instance.log: one line per step, in the
// harness's "<time> - INFO - <message>" form. A nil *RunLog discards.
type RunLog struct {
	mu sync.Mutex // guards b
	b  strings.Builder
}

// Printf adds a line.
func (l *RunLog) Printf(format string, args ...any) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(&l.b, "%s - INFO - %s\n", time.Now().UTC().Format("2006-01-02 15:04:05,000"), fmt.Sprintf(format, args...))
}

// String is the log so far.
func (l *RunLog) String() string {
	if l == nil {
		return ""
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
