package regproxy

import (
	"crypto/sha1"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
)

// npmAccept asks for the abbreviated metadata npm installs from.
const npmAccept = "application/vnd.npm.install-v1+json; q=1.0, application/json; q=0.8"

var npmNameRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^(@[A-Za-z0-9][A-Za-z0-9._~-]*/)?[A-Za-z0-9._~-]+$`)
})

// serveNPM answers npm: "<name>" (a scope's "/" may be %2f) is a
// packument, "<name>/-/<file>" a tarball.
func (p *Proxy) serveNPM(w http.ResponseWriter, req *http.Request, rest string) {
	if u, err := url.PathUnescape(rest); err == nil {
		rest = u
	}
	name, file, isTarball := strings.Cut(rest, "/-/")
	if !npmNameRE().MatchString(name) || strings.HasPrefix(name, ".") || strings.Contains(name, "/.") || isTarball && (!safePath(file) || strings.Contains(file, "/")) {
		http.NotFound(w, req)
		return
	}
	if isTarball {
		p.serveTarball(w, req, name, file)
		return
	}
	b, err := p.packument(req, name, false)
	if err != nil {
		p.fail(w, "npm "+name, err)
		return
	}
	out, err := rewriteTarballs(b, "http://"+req.Host+"/npm/"+name+"/-/")
	if err != nil {
		p.fail(w, "npm "+name, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(out)
}

func (p *Proxy) packumentPath(name string) string {
	return filepath.Join(p.Dir, "npm", "packuments", filepath.FromSlash(name)+".json")
}

// packument is name's metadata, kept or (when absent, or refresh) fetched
// and kept.
func (p *Proxy) packument(req *http.Request, name string, refresh bool) ([]byte, error) {
	defer p.lockFor("npm/" + name)()
	kept := p.packumentPath(name)
	if !refresh {
		if b, err := os.ReadFile(kept); err == nil {
			return b, nil
		}
	}
	up := strings.TrimSuffix(p.NPM, "/") + "/" + strings.Replace(name, "/", "%2f", 1)
	resp, err := p.get(req, up, npmAccept)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", up, err)
	}
	if !json.Valid(b) {
		return nil, fmt.Errorf("%s: not JSON", up)
	}
	return b, writeFrom(kept, strings.NewReader(string(b)), nil)
}

// npmDist is a version's dist of a packument.
type npmDist struct {
	Tarball   string `json:"tarball"`
	Integrity string `json:"integrity"`
	Shasum    string `json:"shasum"`
}

// rewriteTarballs returns packument b with each version's tarball URL
// on base (the proxy's tarball path of the package).
func rewriteTarballs(b []byte, base string) ([]byte, error) {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, err
	}
	var versions map[string]map[string]json.RawMessage
	if raw, ok := doc["versions"]; ok {
		if err := json.Unmarshal(raw, &versions); err != nil {
			return nil, fmt.Errorf("versions: %w", err)
		}
	}
	for v, meta := range versions {
		var dist map[string]any
		if err := json.Unmarshal(meta["dist"], &dist); err != nil {
			return nil, fmt.Errorf("version %s: dist: %w", v, err)
		}
		if t, ok := dist["tarball"].(string); ok {
			dist["tarball"] = base + path.Base(t)
		}
		meta["dist"], _ = json.Marshal(dist)
	}
	if versions != nil {
		doc["versions"], _ = json.Marshal(versions)
	}
	return json.Marshal(doc)
}

// distOf finds the version of packument b whose tarball is file.
func distOf(b []byte, file string) (npmDist, bool) {
	var doc struct {
		Versions map[string]struct {
			Dist npmDist `json:"dist"`
		} `json:"versions"`
	}
	if json.Unmarshal(b, &doc) != nil {
		return npmDist{}, false
	}
	for _, v := range doc.Versions {
		if path.Base(v.Dist.Tarball) == file {
			return v.Dist, true
		}
	}
	return npmDist{}, false
}

// digest is one hash of a tarball: the algorithm's name in an integrity
// string and cacache's path, and the hash as hex.
type digest struct {
	algo string
	hex  string
}

// digests are the hashes a dist names that npm can look a tarball up by:
// its SRI integrity's sha512 (or sha1) and its shasum (sha1).
func (d npmDist) digests() []digest {
	var out []digest
	for _, sri := range strings.Fields(d.Integrity) {
		algo, b64, ok := strings.Cut(sri, "-")
		raw, err := base64.StdEncoding.DecodeString(b64)
		if ok && err == nil && (algo == "sha512" || algo == "sha1") {
			out = append(out, digest{algo, hex.EncodeToString(raw)})
		}
	}
	if len(d.Shasum) == 40 && !containsDigest(out, "sha1") {
		out = append(out, digest{"sha1", strings.ToLower(d.Shasum)})
	}
	return out
}

func containsDigest(ds []digest, algo string) bool {
	for _, d := range ds {
		if d.algo == algo {
			return true
		}
	}
	return false
}

func (d digest) newHash() hash.Hash {
	if d.algo == "sha512" {
		return sha512.New()
	}
	return sha1.New()
}

// ContentPath is where npm's cache (cacache) keeps content of a digest,
// under its cache dir.
func ContentPath(cacheDir, algo, hexSum string) string {
	return filepath.Join(cacheDir, "content-v2", algo, hexSum[:2], hexSum[2:4], hexSum[4:])
}

// serveTarball serves a package's tarball from the cache, fetching it
// from the URL the packument names when the cache lacks it (a version
// the kept packument does not list refreshes it, once).
func (p *Proxy) serveTarball(w http.ResponseWriter, req *http.Request, name, file string) {
	b, err := p.packument(req, name, false)
	dist, ok := distOf(b, file)
	if err == nil && !ok {
		b, err = p.packument(req, name, true)
		dist, ok = distOf(b, file)
	}
	switch {
	case err != nil:
		p.fail(w, "npm "+name, err)
		return
	case !ok:
		http.Error(w, fmt.Sprintf("npm %s: no version has the tarball %s", name, file), http.StatusNotFound)
		return
	}
	ds := dist.digests()
	if len(ds) == 0 {
		p.fail(w, "npm "+file, fmt.Errorf("%s has no integrity or shasum to check it by", file))
		return
	}
	cache := filepath.Join(p.Dir, NPMContentDir)
	kept := ContentPath(cache, ds[0].algo, ds[0].hex)
	if _, err := os.Stat(kept); err != nil {
		unlock := p.lockFor("npm-tarball/" + ds[0].hex)
		if _, err = os.Stat(kept); err != nil {
			err = p.fetchTarball(req, dist, ds, cache)
		}
		unlock()
		if err != nil {
			p.fail(w, "npm "+file, err)
			return
		}
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	http.ServeFile(w, req, kept)
}

// fetchTarball downloads dist's tarball, checks every digest and keeps
// it under the first, linked under the others.
func (p *Proxy) fetchTarball(req *http.Request, dist npmDist, ds []digest, cache string) error {
	resp, err := p.get(req, dist.Tarball, "")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	hs := make([]hash.Hash, len(ds))
	ws := make([]io.Writer, len(ds))
	for i, d := range ds {
		hs[i] = d.newHash()
		ws[i] = hs[i]
	}
	kept := ContentPath(cache, ds[0].algo, ds[0].hex)
	err = writeFrom(kept, io.TeeReader(resp.Body, io.MultiWriter(ws...)), func() error {
		for i, d := range ds {
			if got := hex.EncodeToString(hs[i].Sum(nil)); got != d.hex {
				return fmt.Errorf("%s: %s %s, the registry says %s", dist.Tarball, d.algo, got, d.hex)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, d := range ds[1:] {
		other := ContentPath(cache, d.algo, d.hex)
		if os.MkdirAll(filepath.Dir(other), 0o755) == nil {
			os.Link(kept, other) // (a second name only: npm looks up by the lockfile's algorithm)
		}
	}
	return nil
}
