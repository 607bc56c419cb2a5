package dataset

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// An image instance is one whose row names the OCI image it runs on
// (Instance.Image, the row's docker_image field, or the name an image
// template makes from the row): the image holds the repository at
// /testbed with its dependencies installed, so no environment is built for
// it. The image must be in msb's cache (msb cache import-image).

// ErrBadImageTemplate: an image template names a placeholder there is no
// value for.
var ErrBadImageTemplate = errors.New("bad image template")

// imagePlaceholders are what an image template may name, each with how a
// row gives its value.
var imagePlaceholders = map[string]func(Instance) string{
	"instance_id": func(in Instance) string { return in.InstanceID },
	// SWE-bench's harness: sweb.eval.x86_64.{instance_id_1776}.
	"instance_id_1776": func(in Instance) string {
		return strings.ReplaceAll(strings.ToLower(in.InstanceID), "__", "_1776_")
	},
	// SWE-Gym's and OpenHands' images: sweb.eval.x86_64.{instance_id_s}.
	"instance_id_s": func(in Instance) string { return strings.ReplaceAll(strings.ToLower(in.InstanceID), "__", "_s_") },
	"repo":          func(in Instance) string { return in.Repo },
	"version":       func(in Instance) string { return in.Version },
	"image_name":    func(in Instance) string { return in.ImageName },
	// The repository's owner and name apart, and the pull request's
	// number: Multi-SWE-bench's images are
	// mswebench/{org_lower}_m_{repo_name_lower}:pr-{number}.
	"org":       func(in Instance) string { org, _, _ := strings.Cut(in.Repo, "/"); return org },
	"repo_name": func(in Instance) string { _, name, _ := strings.Cut(in.Repo, "/"); return name },
	"number":    prNumber,
}

// lowerSuffix, after a placeholder's name, lowercases its value:
// {org_lower}. ({instance_id_lower} is one of these.)
const lowerSuffix = "_lower"

// placeholder is the value function of a template's placeholder name,
// nil for an unknown one.
func placeholder(name string) func(Instance) string {
	if f := imagePlaceholders[name]; f != nil {
		return f
	}
	if base, ok := strings.CutSuffix(name, lowerSuffix); ok && imagePlaceholders[base] != nil {
		return func(in Instance) string { return strings.ToLower(imagePlaceholders[base](in)) }
	}
	return nil
}

// prNumber is a row's pull request number: a Multi-SWE-bench row's
// "number", else the digits after the last "-" of a SWE-bench-style id
// (django__django-11099), else "".
func prNumber(in Instance) string {
	if in.MultiSWE != nil {
		return strconv.FormatInt(in.MultiSWE.Number, 10)
	}
	i := strings.LastIndexByte(in.InstanceID, '-')
	if i < 0 {
		return ""
	}
	n := in.InstanceID[i+1:]
	if _, err := strconv.ParseUint(n, 10, 64); err != nil {
		return ""
	}
	return n
}

// placeholderRE matches a template's placeholders; compiled on first use.
var placeholderRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\{[^{}]*\}`) })

// CheckImageTemplate reports a template placeholder that is not one of
// imagePlaceholders, and a template without any (every row would name the
// same image, which is --image's job, not a mapping's).
func CheckImageTemplate(tmpl string) error {
	found := placeholderRE().FindAllString(tmpl, -1)
	if len(found) == 0 {
		return fmt.Errorf("%w: %q names no placeholder (such as {instance_id})", ErrBadImageTemplate, tmpl)
	}
	for _, p := range found {
		if placeholder(strings.Trim(p, "{}")) == nil {
			return fmt.Errorf("%w: %q: unknown placeholder %s (want instance_id, instance_id_1776, instance_id_s, repo, version, image_name, org, repo_name or number, each also as NAME_lower)",
				ErrBadImageTemplate, tmpl, p)
		}
	}
	return nil
}

// ImageOf is the image the template names for in (checked with
// CheckImageTemplate first). A placeholder whose field the row leaves
// empty is an error naming the field.
func ImageOf(tmpl string, in Instance) (string, error) {
	var missing string
	out := placeholderRE().ReplaceAllStringFunc(tmpl, func(p string) string {
		name := strings.Trim(p, "{}")
		v := placeholder(name)(in)
		if v == "" && missing == "" {
			missing = name
		}
		return v
	})
	if missing != "" {
		return "", fmt.Errorf("%w: the image template uses {%s} and the row has none", ErrMissingField, missing)
	}
	return out, nil
}

// applyImageTemplate names in's image from tmpl when the row names none.
func applyImageTemplate(in *Instance, tmpl string) []RowError {
	if tmpl == "" || in.Image != "" {
		return nil
	}
	img, err := ImageOf(tmpl, *in)
	if err != nil {
		return []RowError{{InstanceID: in.InstanceID, Field: "image", Err: err}}
	}
	in.Image = img
	return nil
}
