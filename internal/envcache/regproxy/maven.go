package regproxy

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
)

// MavenMirrorID is the id of the proxy's mirror of Maven Central in
// Maven's settings: "central", the id Maven records in the local
// repository (_remote.repositories) for what it fetched, so that an
// offline mvn without the mirror accepts those files as Central's.
const MavenMirrorID = "central"

// MavenSettings is a settings.xml that mirrors Maven Central at url (the
// proxy's /maven2/).
func MavenSettings(url string) string {
	return `<settings xmlns="http://maven.apache.org/SETTINGS/1.0.0">
  <mirrors>
    <mirror>
      <id>` + MavenMirrorID + `</id>
      <mirrorOf>central</mirrorOf>
      <name>Maven Central through msb's registry proxy</name>
      <url>` + url + `</url>
    </mirror>
  </mirrors>
</settings>
`
}

var mavenPathRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9._~+-]+(/[A-Za-z0-9._~+-]+)+$`) })

// mavenChecksums are the suffixes of the files that hold another file's
// checksum or signature.
var mavenChecksums = []string{".sha1", ".md5", ".sha256", ".sha512", ".asc"}

// serveMaven answers a Maven repository's layout, <group path>/<artifact>/
// <version>/<file> and the maven-metadata.xml files. An artifact is kept
// by its path, checked against upstream's .sha1 when there is one; its
// bytes never change upstream, so it is served from the cache first.
// Metadata (the versions of an artifact, the builds of a snapshot)
// changes: it is asked upstream first and the kept one serves when
// upstream cannot answer.
func (p *Proxy) serveMaven(w http.ResponseWriter, req *http.Request, rel string) {
	if !safePath(rel) || !mavenPathRE().MatchString(rel) {
		http.NotFound(w, req)
		return
	}
	kept := filepath.Join(p.Dir, MavenDir, filepath.FromSlash(rel))
	base := path.Base(rel)
	mutable := strings.HasPrefix(base, "maven-metadata") || strings.Contains(rel, "-SNAPSHOT/")
	if !exists(kept) || mutable {
		unlock := p.lockFor("maven/" + rel)
		var err error
		switch {
		case !exists(kept):
			err = p.fetchMaven(req, rel, kept)
		case mutable:
			err = p.fetchMaven(recheck(req), rel, kept)
		}
		unlock()
		if err != nil && (!mutable || !exists(kept)) {
			p.fail(w, "maven "+rel, err)
			return
		}
		if err != nil {
			p.servingKept("maven "+rel, err)
		}
	}
	http.ServeFile(w, req, kept)
}

// fetchMaven fetches rel into kept. A file that is not itself a checksum
// gets its .sha1 first (kept too: Maven asks for it next) and is kept
// only when it matches.
func (p *Proxy) fetchMaven(req *http.Request, rel, kept string) error {
	up := strings.TrimSuffix(p.Maven, "/") + "/" + rel
	if isMavenChecksum(rel) {
		return p.fetchTo(req, up, kept, nil)
	}
	want, err := p.mavenSHA1(req, rel, kept+".sha1")
	if err != nil {
		return err
	}
	if want == "" {
		return p.fetchTo(req, up, kept, nil)
	}
	h := sha1.New()
	return p.fetchTo(req, up, kept, func() error {
		if got := hex.EncodeToString(h.Sum(nil)); got != want {
			return fmt.Errorf("%s: sha1 %s, its .sha1 says %s", up, got, want)
		}
		return nil
	}, h)
}

// mavenSHA1 is rel's SHA-1 as upstream's .sha1 file says it (fetched into
// kept), "" when upstream has none.
func (p *Proxy) mavenSHA1(req *http.Request, rel, kept string) (string, error) {
	unlock := p.lockFor("maven/" + rel + ".sha1")
	err := p.fetchTo(req, strings.TrimSuffix(p.Maven, "/")+"/"+rel+".sha1", kept, nil)
	unlock()
	switch {
	case isNotFound(err):
		return "", nil
	case err != nil:
		return "", err
	}
	b, err := os.ReadFile(kept)
	if err != nil {
		return "", err
	}
	// The file is the hex sum, sometimes followed by the file's name.
	if f := strings.Fields(string(b)); len(f) > 0 && len(f[0]) == 40 {
		return strings.ToLower(f[0]), nil
	}
	os.Remove(kept)
	return "", fmt.Errorf("%s.sha1 upstream is not a SHA-1: %.60q", rel, b)
}

func isMavenChecksum(rel string) bool {
	for _, s := range mavenChecksums {
		if strings.HasSuffix(rel, s) {
			return true
		}
	}
	return false
}
