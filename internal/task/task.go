package task

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/minisandbox/msb/internal/dataset"
	"github.com/minisandbox/msb/internal/envcache"
	"github.com/minisandbox/msb/internal/grading"
	_ "github.com/minisandbox/msb/internal/grading/multiswe" // registers its grader (grading.For)
	"github.com/minisandbox/msb/internal/sandbox"
	"github.com/minisandbox/msb/internal/spec"
)

// Format is mixed into every spec digest; bump it when what an evaluation
// runs changes (the eval script, the apply commands), so that resumed runs
// evaluate again. 3: install steps run in the instance's install layer,
// eval steps (eval_install).
const Format = 3

// Env is what tasks are made from.
type Env struct {
	Runtime *sandbox.Runtime
	Cache   *envcache.Cache
	Logger  *slog.Logger
}

// Task is an instance with its resolved spec.
type Task struct {
	Instance dataset.Instance
	Spec     spec.Spec
	// SpecDigest covers the spec and every field of the instance that an
	// evaluation reads: a stored result with another digest is stale.
	SpecDigest string
	parse      grading.ParseFunc
	grader     grading.Grader // the rules of the instance's harness (grading.For)
}

// New resolves the spec of inst (ov may be nil) and checks that its log
// parser exists. The errors are spec.ErrNoSpec and spec.ErrInvalidSpec.
func New(inst dataset.Instance, ov *spec.Overrides) (*Task, error) {
	sp, err := spec.Resolve(inst, ov)
	if err != nil {
		return nil, err
	}
	parse, err := grading.Lookup(sp.LogParser)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", spec.ErrInvalidSpec, err)
	}
	g, err := grading.For(inst, sp.LogParser)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", spec.ErrInvalidSpec, err)
	}
	return &Task{Instance: inst, Spec: sp, SpecDigest: specDigest(inst, sp), parse: parse, grader: g}, nil
}

// ID is the instance id.
func (t *Task) ID() string { return t.Instance.InstanceID }

func specDigest(in dataset.Instance, sp spec.Spec) string {
	sp.Source = nil // where a field came from does not change what runs
	b, _ := json.Marshal(struct {
		Format     int
		Spec       spec.Spec
		Repo       string
		BaseCommit string
		EnvCommit  string
		TestPatch  string
		Bug        string
		FailToPass []string
		PassToPass []string
		Image      string `json:",omitempty"`
	}{Format, sp, in.Repo, in.BaseCommit, spec.EnvironmentCommit(in), in.TestPatch, bugPatch(in), in.FailToPass, in.PassToPass, in.Image})
	return digest(b)
}

func bugPatch(in dataset.Instance) string {
	if in.BugIsGoldPatch() {
		return in.Patch
	}
	return ""
}

func digest(b []byte) string {
	h := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(h[:])
}

// PatchDigest keys a stored result by its patch: "none" for a patch that
// is None, else the SHA-256 of its bytes.
func PatchDigest(patch *string) string {
	if patch == nil {
		return "none"
	}
	return digest([]byte(*patch))
}
