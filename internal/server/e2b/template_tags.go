package e2b

import (
	"net/http"
	"slices"
	"strings"

	"github.com/minisandbox/msb/internal/api"
)

// tagsOf checks the tags of an assign or remove for the template name:
// each is a tag or name:tag (the SDK's Template.assign_tags passes either;
// E2B answers the tag part), neither part empty.
func tagsOf(name string, tags []string) ([]string, bool) {
	if len(tags) == 0 {
		return nil, false
	}
	out := make([]string, 0, len(tags))
	for _, g := range tags {
		n, tag, named := strings.Cut(g, ":")
		if !named {
			tag = n
		} else if n != name {
			return nil, false
		}
		if tag == "" || strings.Contains(tag, ":") {
			return nil, false
		}
		out = append(out, tag)
	}
	return out, true
}

// assignTags is POST /templates/tags (Template.assign_tags): tags added to
// the build the target (name:tag or name:build-id) names. msb keeps one
// ready build a template, so every tag names it, and so does the target.
func (f *Front) assignTags(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Target string   `json:"target"`
		Tags   []string `json:"tags"`
	}
	if err := decode(r, &req); err != nil {
		engineError(w, err)
		return
	}
	t, tags, ok := f.taggedTemplate(w, req.Target, req.Tags)
	if !ok {
		return
	}
	t.mu.Lock()
	if t.done == nil {
		t.mu.Unlock()
		apiError(w, api.CodeNotFound, "template '%s' has no build that is ready to tag", req.Target)
		return
	}
	for _, g := range tags {
		if !slices.Contains(t.tags, g) {
			t.tags = append(t.tags, g)
		}
	}
	id := t.done.id
	t.mu.Unlock()
	f.saveTemplate(t)
	writeJSON(w, http.StatusCreated, map[string]any{"buildID": id, "tags": tags})
}

// removeTags is DELETE /templates/tags (Template.remove_tags): the tags
// no longer name the template's build.
func (f *Front) removeTags(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Name string   `json:"name"`
		Tags []string `json:"tags"`
	}
	if err := decode(r, &req); err != nil {
		engineError(w, err)
		return
	}
	t, tags, ok := f.taggedTemplate(w, req.Name, req.Tags)
	if !ok {
		return
	}
	t.mu.Lock()
	t.tags = slices.DeleteFunc(t.tags, func(g string) bool { return slices.Contains(tags, g) })
	t.mu.Unlock()
	f.saveTemplate(t)
	w.WriteHeader(http.StatusNoContent)
}

// taggedTemplate is the template a tags request names by ref and its tags
// as full names; with false, the error is answered.
func (f *Front) taggedTemplate(w http.ResponseWriter, ref string, raw []string) (*template, []string, bool) {
	t := f.templateByRef(ref)
	if t == nil {
		apiError(w, api.CodeNotFound, "template '%s' not found", ref)
		return nil, nil, false
	}
	tags, ok := tagsOf(t.name, raw)
	if !ok {
		apiError(w, api.CodeBadRequest, "tags %q: each must be a tag or %s:tag, neither part empty", raw, t.name)
		return nil, nil, false
	}
	return t, tags, true
}
