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

// sumdbNameRE: a checksum database's name (sum.golang.org); sumdbFileRE:
// the characters of what is asked of it (a lookup's escaped module@version,
// a tile's path).
var (
	sumdbNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9.-]+$`) })
	sumdbFileRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9._~!+/@-]+$`) })
)

// serveGo answers the module proxy protocol: <module>/@v/list,
// <module>/@v/<version>.info|.mod|.zip and <module>/@latest, and the
// checksum database through the proxy (sumdb/..., serveSumDB).
func (p *Proxy) serveGo(w http.ResponseWriter, req *http.Request, rest string) {
	if db, ok := strings.CutPrefix(rest, "sumdb/"); ok {
		p.serveSumDB(w, req, db)
		return
	}
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
	p.serveGoFile(w, req, rel, file == "list" || file == "@latest")
}

// serveSumDB answers <name>/supported, /latest, /lookup/<module>@<version>
// and /tile/... of a checksum database as the upstream proxy does
// (proxy.golang.org serves sum.golang.org's), keeping them as
// go/sumdb/<name>/...: the go command asks <proxy>/sumdb/<name>/supported
// before the database itself, so a build reaches sum.golang.org through
// the proxy (a host that resolves no other name still verifies a module
// that go.sum lacks), and an offline build reads the kept answers through
// its file:// proxy. The go command checks the database's signed tree
// itself. supported and latest are asked upstream first; lookups and
// tiles never change.
func (p *Proxy) serveSumDB(w http.ResponseWriter, req *http.Request, rest string) {
	name, file, ok := strings.Cut(rest, "/")
	valid := ok && sumdbNameRE().MatchString(name) && safePath(file) && sumdbFileRE().MatchString(file) &&
		(file == "supported" || file == "latest" || strings.HasPrefix(file, "lookup/") || strings.HasPrefix(file, "tile/"))
	if !valid {
		http.NotFound(w, req)
		return
	}
	p.serveGoFile(w, req, "sumdb/"+name+"/"+file, file == "supported" || file == "latest")
}

// serveGoFile serves rel of the Go proxy's layout from the download
// cache, fetching it first when the cache lacks it or it is mutable (its
// kept copy serves when upstream cannot answer).
func (p *Proxy) serveGoFile(w http.ResponseWriter, req *http.Request, rel string, mutable bool) {
	kept := filepath.Join(p.Dir, GoDir, filepath.FromSlash(rel))
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
