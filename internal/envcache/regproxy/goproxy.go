package regproxy

import (
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
)

// goPathRE: the characters of an escaped module path and version (the go
// command writes upper case as "!" and the lower letter).
var goPathRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9._~!+/-]+$`) })

// serveGo answers the module proxy protocol: <module>/@v/list,
// <module>/@v/<version>.info|.mod|.zip and <module>/@latest. The checksum
// database is not proxied (a 404 sends go to sum.golang.org itself).
func (p *Proxy) serveGo(w http.ResponseWriter, req *http.Request, rest string) {
	mod, file, ok := strings.Cut(rest, "/@v/")
	if !ok {
		mod, ok = strings.CutSuffix(rest, "/@latest")
		file = "@latest"
	}
	valid := ok && safePath(mod) && goPathRE().MatchString(mod) && !strings.HasPrefix(mod, "sumdb/") &&
		(file == "list" || file == "@latest" || safePath(file) && !strings.Contains(file, "/") && goPathRE().MatchString(file) &&
			(strings.HasSuffix(file, ".info") || strings.HasSuffix(file, ".mod") || strings.HasSuffix(file, ".zip")))
	if !valid {
		http.NotFound(w, req)
		return
	}
	rel := mod + "/@v/" + file
	if file == "@latest" {
		rel = mod + "/@latest"
	}
	kept := filepath.Join(p.Dir, GoDir, filepath.FromSlash(rel))
	mutable := file == "list" || file == "@latest"
	if _, err := os.Stat(kept); err != nil || mutable {
		unlock := p.lockFor("go/" + rel)
		up := req
		if mutable && exists(kept) {
			up = recheck(req)
		}
		err := p.fetchGo(up, rel, kept)
		unlock()
		if err != nil && (!mutable || !exists(kept)) {
			p.fail(w, "go "+rel, err)
			return
		}
		if err != nil {
			p.servingKept("go "+rel, err)
		}
	}
	http.ServeFile(w, req, kept)
}

// fetchGo fetches one file of the module proxy protocol into kept. The go
// command checks what it gets (go.sum, the checksum database).
func (p *Proxy) fetchGo(req *http.Request, rel, kept string) error {
	resp, err := p.get(req, strings.TrimSuffix(p.Go, "/")+"/"+rel, "")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return writeFrom(kept, resp.Body, nil)
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
