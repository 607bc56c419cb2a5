package cli

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/minisandbox/msb/internal/api"
)

// TestImportImageAuth: msb cache import-image against a registry that
// wants basic credentials (go-containerregistry's registry behind a
// password check): without them, or with a wrong password from
// --password-stdin, it exits 2 with one line of kind "unauthorized" that
// never shows the password; --username with --password-stdin, --authfile
// and $REGISTRY_AUTH_FILE import. (internal/rootfs TestImportRegistryAuth
// runs Debian's docker-registry with htpasswd and with the token flow.)
func TestImportImageAuth(t *testing.T) {
	const user, password = "msb-user", "cli-secret-pw"
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != user || p != password {
			w.Header().Set("WWW-Authenticate", `Basic realm="msb-test"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		reg.ServeHTTP(w, r)
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	ref := host + "/test/private:1"
	img, err := mutate.AppendLayers(empty.Image, tarLayer(t, map[string]string{"etc/private": "yes\n"}))
	if err != nil {
		t.Fatal(err)
	}
	tag, err := name.NewTag(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(tag, img, remote.WithAuth(&authn.Basic{Username: user, Password: password})); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	home := t.TempDir() // no docker or podman config of the host's user answers
	noConfig := []string{"HOME=" + home, "DOCKER_CONFIG=" + filepath.Join(home, ".docker"), "XDG_RUNTIME_DIR=" + home, "XDG_CONFIG_HOME=" + home, "REGISTRY_AUTH_FILE="}
	authFile := filepath.Join(t.TempDir(), "auth.json")
	b, _ := json.Marshal(map[string]any{"auths": map[string]any{host: map[string]string{"auth": base64.StdEncoding.EncodeToString([]byte(user + ":" + password))}}})
	if err := os.WriteFile(authFile, b, 0o600); err != nil {
		t.Fatal(err)
	}
	importImage := func(env []string, stdin string, args ...string) result {
		t.Helper()
		cmd := msbCmd(t, dir, append(noConfig, env...), append(append([]string{"cache", "import-image", "--insecure"}, args...), "docker://"+ref)...)
		cmd.Stdin = strings.NewReader(stdin)
		return run(cmd)
	}

	for _, tc := range []struct {
		what, stdin string
		args        []string
	}{
		{"no credentials", "", nil},
		{"wrong password", "wrong-" + password + "\n", []string{"--username", user, "--password-stdin"}},
	} {
		r := importImage(nil, tc.stdin, append([]string{"--json"}, tc.args...)...)
		if r.code != exitUsage || strings.Contains(r.stdout+r.stderr, password) {
			t.Fatalf("%s: exit %d (want 2), or the password is shown:\n%s%s", tc.what, r.code, r.stdout, r.stderr)
		}
		var out api.CLIError
		if err := json.Unmarshal([]byte(strings.TrimSpace(r.stdout+r.stderr)), &out); err != nil || out.Error.Code != string(api.CodeUnauthorized) ||
			!strings.Contains(out.Error.Message, "registry authentication failed: "+host) {
			t.Fatalf("%s: %v %+v\n%s%s", tc.what, err, out, r.stdout, r.stderr)
		}
	}
	if r := importImage(nil, password+"\n", "--password-stdin"); r.code != exitUsage || !strings.Contains(r.stderr, "--password-stdin needs --username") {
		t.Fatalf("--password-stdin alone: %d %s", r.code, r.stderr)
	}
	for _, tc := range []struct {
		what  string
		env   []string
		stdin string
		args  []string
	}{
		{"--password-stdin", nil, password + "\n", []string{"--username", user, "--password-stdin"}},
		{"--authfile", nil, "", []string{"--authfile", authFile}},
		{"REGISTRY_AUTH_FILE", []string{"REGISTRY_AUTH_FILE=" + authFile}, "", nil},
	} {
		if r := importImage(tc.env, tc.stdin, tc.args...); r.code != 0 || !strings.Contains(r.stdout, "ref image/"+ref) {
			t.Fatalf("%s: exit %d\n%s%s", tc.what, r.code, r.stdout, r.stderr)
		}
	}
}
