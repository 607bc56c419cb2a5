package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"
)

// printJSON writes v (a type of package api) to stdout as one JSON value.
func printJSON(v any) error {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("writing JSON output: %w", err)
	}
	return nil
}

// table writes rows aligned in columns to stdout.
type table struct{ tw *tabwriter.Writer }

func newTable(header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)}
	t.row(header...)
	return t
}

func (t *table) row(cells ...string) { fmt.Fprintln(t.tw, strings.Join(cells, "\t")) }

func (t *table) flush() error {
	if err := t.tw.Flush(); err != nil {
		return fmt.Errorf("writing output: %w", err)
	}
	return nil
}

// problem is one failed item, printed in full under a table.
type problem struct{ id, text string }

// printProblems writes every problem in full (tables show a first line only).
func printProblems(w io.Writer, title string, ps []problem) {
	if len(ps) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%s:\n", title)
	for _, p := range ps {
		fmt.Fprintf(w, "\n%s:\n", p.id)
		for _, l := range strings.Split(strings.TrimRight(p.text, "\n"), "\n") {
			fmt.Fprintf(w, "    %s\n", l)
		}
	}
}

// firstLine is a cell's text: the first line of s, cut at 80 runes; the
// full text goes under the table (printProblems).
func firstLine(s string) string {
	s, _, more := strings.Cut(s, "\n")
	if r := []rune(s); len(r) > 80 {
		s, more = string(r[:77]), true
	}
	if more {
		s += " ..."
	}
	return s
}

func fmtBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// fmtSize is a size in a narrow table cell: 18B, 3.1K, 96K, 20.6M, 2.0G.
func fmtSize(n int64) string {
	v, units := float64(n), []string{"B", "K", "M", "G", "T"}
	i := 0
	for ; v >= 1024 && i < len(units)-1; i++ {
		v /= 1024
	}
	switch {
	case i == 0:
		return fmt.Sprintf("%dB", n)
	case v < 100:
		return fmt.Sprintf("%.1f%s", v, units[i])
	}
	return fmt.Sprintf("%.0f%s", v, units[i])
}

// fmtNs is a duration in a table cell ("-" for none).
func fmtNs(ns int64) string {
	if ns == 0 {
		return "-"
	}
	return FormatDuration(time.Duration(ns))
}

// outputWidth is the width of msb's text output: tables and wrapped text
// fit in it (--json has the full data).
const outputWidth = 100

// wrapText breaks s at spaces into lines of at most width runes (a longer
// word stays whole on a line of its own).
func wrapText(s string, width int) []string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(s) {
		switch {
		case line == "":
			line = w
		case utf8.RuneCountInString(line)+1+utf8.RuneCountInString(w) <= width:
			line += " " + w
		default:
			lines = append(lines, line)
			line = w
		}
	}
	return append(lines, line)
}

// FormatDuration is a duration in a table cell, to the precision that
// matters (msb-bench's tables use it too).
func FormatDuration(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%.0fµs", float64(d)/1e3)
	case d < time.Second:
		return fmt.Sprintf("%.2fms", float64(d)/1e6)
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}

// or is s, or def when s is blank.
func or(s, def string) string {
	if strings.TrimSpace(s) == "" {
		return def
	}
	return s
}
