package regproxy

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
)

// CargoHost is the name cargo knows the proxy's registry by. It resolves
// nowhere: cargo reaches it through the proxy as its HTTP proxy
// (CARGO_HTTP_PROXY), so the registry's URL, and the names of the dirs
// cargo keeps its index and crates in (registry/index/<host>-<hash>), are
// the same in every build whatever port the proxy has.
const CargoHost = "crates.msb.invalid"

// CargoConfig is the cargo configuration (CARGO_HOME/config.toml) that
// replaces crates.io with the proxy's sparse registry. It stays in the
// dependency dirs a build fills: an offline cargo finds the crates it
// fetched under the replacement's name only.
const CargoConfig = `# msb: crates.io through msb's registry proxy (cargo reaches ` + CargoHost + `
# through CARGO_HTTP_PROXY while a build has the network; offline, from its cache).
[source.crates-io]
replace-with = "msb"

[source.msb]
registry = "sparse+http://` + CargoHost + `/cargo/index/"
`

var (
	crateNameRE    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`) })
	crateVersionRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9A-Za-z.+-]{1,100}$`) })
)

// cratePrefix is the dir of a crate's index file in a sparse index (and
// a local registry), in the name's case: 1, 2, 3/a, ab/cd.
func cratePrefix(name string) string {
	switch len(name) {
	case 1, 2:
		return fmt.Sprint(len(name))
	case 3:
		return "3/" + name[:1]
	}
	return name[:2] + "/" + name[2:4]
}

// crateIndexPath is the path of a crate's index file: its prefix and
// name, lower case.
func crateIndexPath(name string) string {
	return strings.ToLower(cratePrefix(name) + "/" + name)
}

// serveCargo answers cargo's sparse registry protocol: "index/config.json"
// (downloads on the proxy), "index/<prefix>/<name>" (a crate's index
// file) and "crates/<name>/<version>/download" (a .crate).
func (p *Proxy) serveCargo(w http.ResponseWriter, req *http.Request, rest string) {
	if rest == "index/config.json" {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"dl":"http://%s/cargo/crates"}`, req.Host)
		return
	}
	if file, ok := strings.CutPrefix(rest, "index/"); ok {
		name := file[strings.LastIndex(file, "/")+1:]
		if !crateNameRE().MatchString(name) || file != crateIndexPath(name) {
			http.NotFound(w, req)
			return
		}
		p.serveCrateIndex(w, req, file)
		return
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 4 || parts[0] != "crates" || parts[3] != "download" || !crateNameRE().MatchString(parts[1]) || !crateVersionRE().MatchString(parts[2]) {
		http.NotFound(w, req)
		return
	}
	p.serveCrate(w, req, parts[1], parts[2])
}

// serveCrateIndex serves a crate's index file: asked upstream first (it
// grows with every release), the kept one when upstream cannot answer.
func (p *Proxy) serveCrateIndex(w http.ResponseWriter, req *http.Request, file string) {
	kept := filepath.Join(p.Dir, CargoIndexDir, filepath.FromSlash(file))
	up := req
	if exists(kept) {
		up = recheck(req)
	}
	unlock := p.lockFor("cargo/index/" + file)
	err := p.fetchTo(up, strings.TrimSuffix(p.Cargo, "/")+"/"+file, kept, nil)
	unlock()
	if err != nil && !exists(kept) {
		p.fail(w, "cargo index "+file, err)
		return
	}
	if err != nil {
		p.servingKept("cargo index "+file, err)
	}
	w.Header().Set("Content-Type", "text/plain")
	http.ServeFile(w, req, kept)
}

// CratePath is where the proxy keeps a .crate under the download cache:
// a local registry's layout (cargo's `local-registry` source reads the
// index dir beside it).
func CratePath(dir, name, version string) string {
	return filepath.Join(dir, CargoDir, name+"-"+version+".crate")
}

// serveCrate serves a .crate from the cache, fetching it from the
// download URL upstream's config.json names when the cache lacks it, and
// keeping it only when its SHA-256 is the index's cksum of the version.
func (p *Proxy) serveCrate(w http.ResponseWriter, req *http.Request, name, version string) {
	kept := CratePath(p.Dir, name, version)
	if !exists(kept) {
		unlock := p.lockFor("cargo/crate/" + name + "@" + version)
		var err error
		if !exists(kept) {
			err = p.fetchCrate(req, name, version, kept)
		}
		unlock()
		if err != nil {
			p.fail(w, "crate "+name+" "+version, err)
			return
		}
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	http.ServeFile(w, req, kept)
}

func (p *Proxy) fetchCrate(req *http.Request, name, version, kept string) error {
	sum, err := p.crateChecksum(req, name, version)
	if err != nil {
		return err
	}
	dl, err := p.cargoDownloadURL(req)
	if err != nil {
		return err
	}
	url := expandCrateURL(dl, name, version, sum)
	h := sha256.New()
	return p.fetchTo(req, url, kept, func() error {
		if got := hex.EncodeToString(h.Sum(nil)); got != sum {
			return fmt.Errorf("%s: sha256 %s, the index says %s", url, got, sum)
		}
		return nil
	}, h)
}

// crateChecksum is the cksum of name's version in its index file, kept
// (or, when the kept one lacks the version, fetched and kept).
func (p *Proxy) crateChecksum(req *http.Request, name, version string) (string, error) {
	file := crateIndexPath(name)
	kept := filepath.Join(p.Dir, CargoIndexDir, filepath.FromSlash(file))
	if sum := indexChecksum(kept, name, version); sum != "" {
		return sum, nil
	}
	unlock := p.lockFor("cargo/index/" + file)
	err := p.fetchTo(req, strings.TrimSuffix(p.Cargo, "/")+"/"+file, kept, nil)
	unlock()
	if err != nil {
		return "", fmt.Errorf("the index of crate %s: %w", name, err)
	}
	if sum := indexChecksum(kept, name, version); sum != "" {
		return sum, nil
	}
	return "", fmt.Errorf("crate %s %w: its index has no version %s", name, errNotFound, version)
}

// indexChecksum finds version's cksum in the index file at path ("" when
// the file or the version is missing).
func indexChecksum(path, name, version string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var e struct {
			Name  string `json:"name"`
			Vers  string `json:"vers"`
			Cksum string `json:"cksum"`
		}
		if json.Unmarshal(sc.Bytes(), &e) == nil && e.Vers == version && strings.EqualFold(e.Name, name) && len(e.Cksum) == 64 {
			return strings.ToLower(e.Cksum)
		}
	}
	return ""
}

// cargoDownloadURL is the dl of upstream's config.json, kept (an index
// names where its crates are; it does not change under a running build).
func (p *Proxy) cargoDownloadURL(req *http.Request) (string, error) {
	kept := filepath.Join(p.Dir, CargoIndexDir, "config.json")
	if !exists(kept) {
		unlock := p.lockFor("cargo/config.json")
		err := p.fetchTo(req, strings.TrimSuffix(p.Cargo, "/")+"/config.json", kept, nil)
		unlock()
		if err != nil {
			return "", fmt.Errorf("the registry's config.json: %w", err)
		}
	}
	b, err := os.ReadFile(kept)
	if err != nil {
		return "", err
	}
	var conf struct {
		DL string `json:"dl"`
	}
	if err := json.Unmarshal(b, &conf); err != nil || conf.DL == "" {
		return "", fmt.Errorf("the registry's config.json (%s) names no dl: %v", kept, err)
	}
	return conf.DL, nil
}

// expandCrateURL fills the markers of a registry's dl template; a dl
// without markers gets /{crate}/{version}/download (cargo's rule).
func expandCrateURL(dl, name, version, sum string) string {
	if !strings.Contains(dl, "{") {
		return strings.TrimSuffix(dl, "/") + "/" + name + "/" + version + "/download"
	}
	return strings.NewReplacer("{crate}", name, "{version}", version, "{sha256-checksum}", sum,
		"{prefix}", cratePrefix(name), "{lowerprefix}", strings.ToLower(cratePrefix(name))).Replace(dl)
}

// fetchTo GETs url into path; check, when set, runs after the body went
// through the hashes hs as well.
func (p *Proxy) fetchTo(req *http.Request, url, path string, check func() error, hs ...io.Writer) error {
	resp, err := p.get(req, url, "")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var body io.Reader = resp.Body
	if len(hs) > 0 {
		body = io.TeeReader(resp.Body, io.MultiWriter(hs...))
	}
	return writeFrom(path, body, check)
}
