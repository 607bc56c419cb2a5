package rootfs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

const (
	testRegistryUser = "msb-user"
	// testRegistryPassword's bcrypt hash is testHtpasswd's (cost 5, made
	// once with Python's crypt module: the registry reads only bcrypt).
	testRegistryPassword = "msb-test-password"
	testHtpasswd         = testRegistryUser + ":$2b$05$H37sr36ilWMJ7/FOfMa9KOWa9z4fp5fgJ05sL3.AnQkB8pORjGIyi\n"
)

// TestImportRegistryAuth: a real docker-registry that wants credentials,
// once with basic auth (htpasswd) and once with the distribution spec's
// token flow (its realm a token server of the test, whose signing
// certificate the registry trusts). Without credentials or with a wrong
// password the import is ErrAuth, naming the registry and never the
// password, and leaves nothing; with --username/--password, with an auth
// file (which wins over the docker config) and with the docker config
// alone it imports.
func TestImportRegistryAuth(t *testing.T) {
	for _, mode := range []string{"basic", "token"} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			var auth string
			if mode == "basic" {
				pw := filepath.Join(dir, "htpasswd")
				if err := os.WriteFile(pw, []byte(testHtpasswd), 0o644); err != nil {
					t.Fatal(err)
				}
				auth = fmt.Sprintf("  htpasswd:\n    realm: msb-test\n    path: %s\n", pw)
			}
			var addr string
			var issued *atomic.Int32
			if mode == "basic" {
				addr = startRegistryAuth(t, auth)
			} else {
				addr, issued = startTokenRegistry(t, dir)
			}
			checkChallenge(t, addr, map[string]string{"basic": "Basic ", "token": "Bearer "}[mode])
			ref := addr + "/x/private:1"
			img := buildImage(t, v1.Config{Env: []string{"PRIVATE=1"}}, baseLayer())
			pushAuth(t, ref, img)
			// No config file of the host's user may answer.
			home := t.TempDir()
			t.Setenv("HOME", home)
			t.Setenv("DOCKER_CONFIG", filepath.Join(home, ".docker"))
			t.Setenv("XDG_RUNTIME_DIR", home)
			t.Setenv("REGISTRY_AUTH_FILE", "")
			src := "docker://" + ref

			for _, tc := range []struct {
				what string
				opts OpenOptions
			}{
				{"none", OpenOptions{}},
				{"wrong password", OpenOptions{Username: testRegistryUser, Password: "wrong-" + testRegistryPassword}},
				{"wrong auth file", OpenOptions{AuthFile: authFile(t, addr, testRegistryUser, "wrong-"+testRegistryPassword)}},
			} {
				st := openStore(t)
				tc.opts.Insecure = true
				_, err := importSource(t, st, src, tc.opts)
				if !errors.Is(err, ErrAuth) || !errors.Is(err, ErrImage) {
					t.Fatalf("%s: %v, want ErrAuth", tc.what, err)
				}
				if strings.Contains(err.Error(), testRegistryPassword) || !strings.Contains(err.Error(), addr) {
					t.Fatalf("%s: error shows the password or does not name the registry: %v", tc.what, err)
				}
				t.Logf("%s: %v", tc.what, err)
				if refs := imageRefs(t, st); len(refs) != 0 {
					t.Fatalf("%s: refs %v after a refused import", tc.what, refs)
				}
				mustVerify(t, st)
			}

			writeDockerConfig(t, filepath.Join(home, ".docker"), addr, testRegistryUser, "wrong-"+testRegistryPassword)
			for _, tc := range []struct {
				what string
				opts OpenOptions
			}{
				{"username and password", OpenOptions{Username: testRegistryUser, Password: testRegistryPassword}},
				{"auth file over docker config", OpenOptions{AuthFile: authFile(t, addr, testRegistryUser, testRegistryPassword)}},
			} {
				st := openStore(t)
				tc.opts.Insecure = true
				if _, err := importSource(t, st, src, tc.opts); err != nil {
					t.Fatalf("%s: %v", tc.what, err)
				}
				_, rt := merged(t, st, "image/"+ref)
				if len(rt.Config.Env) != 1 || rt.Config.Env[0] != "PRIVATE=1" {
					t.Fatalf("%s: env %v", tc.what, rt.Config.Env)
				}
			}
			writeDockerConfig(t, filepath.Join(home, ".docker"), addr, testRegistryUser, testRegistryPassword)
			if _, err := importSource(t, openStore(t), src, OpenOptions{Insecure: true}); err != nil {
				t.Fatalf("docker config: %v", err)
			}
			if issued != nil && issued.Load() == 0 {
				t.Fatal("the token service issued no token")
			}
		})
	}
}

// pushAuth pushes img to ref with the test's credentials.
func pushAuth(t *testing.T, ref string, img v1.Image) {
	t.Helper()
	tag, err := name.NewTag(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(tag, img, remote.WithContext(t.Context()),
		remote.WithAuth(&authn.Basic{Username: testRegistryUser, Password: testRegistryPassword})); err != nil {
		t.Fatal(err)
	}
}

// authJSON is a docker/podman auth file for one registry.
func authJSON(registry, user, password string) []byte {
	b, _ := json.Marshal(map[string]any{"auths": map[string]any{
		registry: map[string]string{"auth": base64.StdEncoding.EncodeToString([]byte(user + ":" + password))}}})
	return b
}

func authFile(t *testing.T, registry, user, password string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "auth.json")
	if err := os.WriteFile(p, authJSON(registry, user, password), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func writeDockerConfig(t *testing.T, dir, registry, user, password string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), authJSON(registry, user, password), 0o600); err != nil {
		t.Fatal(err)
	}
}

// checkChallenge checks that the registry at addr asks for credentials
// with the scheme want ("Basic " or "Bearer ").
func checkChallenge(t *testing.T, addr, want string) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/v2/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get("WWW-Authenticate"); resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(got, want) {
		t.Fatalf("/v2/ without credentials: %d %q, want 401 %s...", resp.StatusCode, got, want)
	}
}

// startTokenRegistry runs a docker-registry with token auth behind a
// front server on loopback, which serves the token service at /token and
// proxies the rest to the registry (as nginx would: go-containerregistry
// accepts a loopback realm only on the registry's own host:port). It
// returns the front's host:port and the count of tokens issued.
func startTokenRegistry(t *testing.T, dir string) (string, *atomic.Int32) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	front := l.Addr().String()
	issued := new(atomic.Int32)
	tokens, bundle := tokenHandler(t, dir, issued)
	auth := fmt.Sprintf("  token:\n    realm: http://%s/token\n    service: msb-test-registry\n    issuer: msb-test-issuer\n    rootcertbundle: %s\n", front, bundle)
	backend := startRegistryAuth(t, auth)
	mux := http.NewServeMux()
	mux.Handle("/token", tokens)
	mux.Handle("/", httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: backend}))
	srv := &http.Server{Handler: mux}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return front, issued
}

// tokenHandler is the token service a registry with token auth sends
// clients to (the distribution spec's token flow): GET with basic
// credentials, answered with a JWT (ES256, its certificate in the x5c
// header) granting the scopes asked for, or 401. It returns the handler
// and the PEM file of the certificate, which the registry trusts.
func tokenHandler(t *testing.T, dir string, issued *atomic.Int32) (http.Handler, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "msb-test-issuer"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	bundle := filepath.Join(dir, "token-ca.pem")
	if err := os.WriteFile(bundle, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		if !ok || u != testRegistryUser || p != testRegistryPassword {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"errors":[{"code":"UNAUTHORIZED","message":"bad credentials"}]}`)
			return
		}
		tok, err := signToken(key, der, u, r.URL.Query().Get("service"), r.URL.Query()["scope"])
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		issued.Add(1)
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"token": tok, "access_token": tok, "expires_in": 300})
	}), bundle
}

// signToken makes the registry's JWT: the scopes ("repository:NAME:ACTIONS")
// become its access claim.
func signToken(key *ecdsa.PrivateKey, cert []byte, sub, aud string, scopes []string) (string, error) {
	type access struct {
		Type    string   `json:"type"`
		Name    string   `json:"name"`
		Actions []string `json:"actions"`
	}
	acc := []access{}
	for _, sc := range scopes {
		for s := range strings.SplitSeq(sc, " ") {
			parts := strings.Split(s, ":")
			if len(parts) < 3 {
				continue
			}
			acc = append(acc, access{Type: parts[0], Name: strings.Join(parts[1:len(parts)-1], ":"), Actions: strings.Split(parts[len(parts)-1], ",")})
		}
	}
	now := time.Now().Unix()
	header, _ := json.Marshal(map[string]any{"typ": "JWT", "alg": "ES256", "x5c": []string{base64.StdEncoding.EncodeToString(cert)}})
	claims, _ := json.Marshal(map[string]any{"iss": "msb-test-issuer", "sub": sub, "aud": aud,
		"exp": now + 300, "nbf": now - 10, "iat": now, "jti": rand.Text(), "access": acc})
	enc := base64.RawURLEncoding
	signed := enc.EncodeToString(header) + "." + enc.EncodeToString(claims)
	sum := sha256.Sum256([]byte(signed))
	r, s, err := ecdsa.Sign(rand.Reader, key, sum[:])
	if err != nil {
		return "", err
	}
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return signed + "." + enc.EncodeToString(sig), nil
}
