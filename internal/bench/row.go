package bench

import (
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// Row is one line of `msb bench eval`'s report (eval.go), which predates
// the harness and keeps its own format.
type Row struct {
	Name   string  `json:"name"`
	Stats  Stats   `json:"stats,omitempty"`
	Value  float64 `json:"value,omitempty"`
	Unit   string  `json:"unit,omitempty"`
	Note   string  `json:"note,omitempty"`
	Failed string  `json:"failed,omitempty"`
}

// podmanRow times `podman run --rm IMAGE true` n times, with the image and
// global podman flags of o, for `msb bench eval`.
func podmanRow(n int, msb Stats, o EvalOptions) Row {
	if _, err := exec.LookPath("podman"); err != nil {
		return Row{Name: "podman run --rm", Failed: "podman not installed"}
	}
	img := o.PodmanImage
	if img == "" {
		return Row{Name: "podman run --rm", Failed: "set MSB_BENCH_PODMAN_IMAGE to a local image (no registry is reached)"}
	}
	args := append(append([]string{}, o.PodmanFlags...), "run", "--rm", "--network=none", img, "true")
	var d []time.Duration
	for range n {
		start := time.Now()
		if out, err := exec.Command("podman", args...).CombinedOutput(); err != nil {
			return Row{Name: "podman run --rm " + img + " true", Failed: fmt.Sprintf("%v: %s", err, strings.TrimSpace(string(out)))}
		}
		d = append(d, time.Since(start))
	}
	s := Summarize(d)
	r := Row{Name: "podman run --rm " + img + " true", Stats: s}
	if s.P50 > 0 {
		r.Note = fmt.Sprintf("msb p50 = %.1f%% of this", 100*float64(msb.P50)/float64(s.P50))
	}
	return r
}
