package rootfs

import (
	"context"
	"fmt"
	"os"

	"github.com/docker/cli/cli/config"
	"github.com/google/go-containerregistry/pkg/authn"
)

// registryKeychain finds a registry's credentials as podman does: in the
// auth file given (--authfile, $REGISTRY_AUTH_FILE) first, then in the
// docker and podman config files go-containerregistry's default keychain
// reads (~/.docker/config.json or $DOCKER_CONFIG, then
// $XDG_RUNTIME_DIR/containers/auth.json, with their credential helpers);
// anonymous when none has an entry.
func registryKeychain(authFile string) authn.Keychain {
	if authFile == "" {
		return authn.DefaultKeychain
	}
	return authn.NewMultiKeychain(authFileKeychain{authFile}, authn.DefaultKeychain)
}

// authFileKeychain reads one podman/docker auth file ({"auths": {HOST:
// {"auth": base64(user:password)}}}, credential helpers too).
type authFileKeychain struct{ path string }

func (k authFileKeychain) Resolve(r authn.Resource) (authn.Authenticator, error) {
	return k.ResolveContext(context.Background(), r)
}

func (k authFileKeychain) ResolveContext(_ context.Context, r authn.Resource) (authn.Authenticator, error) {
	f, err := os.Open(k.path)
	if err != nil {
		return nil, fmt.Errorf("%w: registry auth file: %w", ErrAuth, err)
	}
	defer f.Close()
	cf, err := config.LoadFromReader(f)
	if err != nil {
		return nil, fmt.Errorf("%w: registry auth file %s: %w", ErrAuth, k.path, err)
	}
	// Podman keys entries by registry/namespace or by registry.
	for _, key := range []string{r.String(), r.RegistryStr()} {
		ac, err := cf.GetAuthConfig(key)
		if err != nil {
			return nil, fmt.Errorf("%w: registry auth file %s: %w", ErrAuth, k.path, err)
		}
		if ac.Username == "" && ac.Password == "" && ac.Auth == "" && ac.IdentityToken == "" && ac.RegistryToken == "" {
			continue
		}
		return authn.FromConfig(authn.AuthConfig{Username: ac.Username, Password: ac.Password, Auth: ac.Auth,
			IdentityToken: ac.IdentityToken, RegistryToken: ac.RegistryToken}), nil
	}
	return authn.Anonymous, nil
}

// authSource says where the credentials an import used came from, never
// what they are.
func authSource(opts OpenOptions) string {
	switch {
	case opts.Username != "" || opts.Password != "":
		return "the password of user " + opts.Username
	case opts.AuthFile != "":
		return "the credentials of auth file " + opts.AuthFile + " or the docker/podman config files"
	}
	return "the credentials of the docker/podman config files, if any"
}
