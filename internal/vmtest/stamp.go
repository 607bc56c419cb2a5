package vmtest

import (
	"bytes"
	"fmt"
	"io"
	"time"
)

// Stamped returns a writer (for Options.Console) that copies each line
// written to it to w, prefixed with the seconds since Stamped was called,
// as the host's clock counts them: how the log of a guest that ran out of
// time tells where the time went.
func Stamped(w io.Writer) io.Writer {
	return &stamper{w: w, start: time.Now(), lineStart: true}
}

type stamper struct {
	w         io.Writer
	start     time.Time
	lineStart bool
}

func (s *stamper) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		if s.lineStart {
			if _, err := fmt.Fprintf(s.w, "[%7.1fs] ", time.Since(s.start).Seconds()); err != nil {
				return 0, err
			}
		}
		line := p
		if i := bytes.IndexByte(p, '\n'); i >= 0 {
			line = p[:i+1]
		}
		if _, err := s.w.Write(line); err != nil {
			return 0, err
		}
		s.lineStart = line[len(line)-1] == '\n'
		p = p[len(line):]
	}
	return n, nil
}
