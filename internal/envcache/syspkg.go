package envcache

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/minisandbox/msb/internal/dataset"
	"github.com/minisandbox/msb/internal/spec"
)

// checkSystemPackages refuses an instance whose spec needs Debian packages
// its base lacks (the harness installs them with apt-get in the image; a
// build sandbox sees the base read-only). The refusal is not recorded: it
// holds until the packages are installed.
func (c *Cache) checkSystemPackages(inst dataset.Instance, sp spec.Spec, base baseInfo) error {
	if len(sp.SystemPackages) == 0 {
		return nil
	}
	installed, err := c.installedPackages(base)
	if err != nil {
		return err
	}
	var missing []string
	for _, p := range sp.SystemPackages {
		if !installed[p] {
			missing = append(missing, p)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	where := "on the host: apt-get install -y " + strings.Join(missing, " ")
	if !base.host {
		where = "in the base layer " + base.layer.Short()
	}
	return &BuildError{Kind: KindEnv, EnvKey: inst.EnvironmentKey(),
		Reason: fmt.Sprintf("the spec needs Debian packages the base does not have (%s)", where)}
}

// installedPackages reads the base's dpkg status file, once per base.
func (c *Cache) installedPackages(base baseInfo) (map[string]bool, error) {
	c.mu.Lock()
	m := c.dpkg[base.keyStr]
	c.mu.Unlock()
	if m != nil {
		return m, nil
	}
	status := "/var/lib/dpkg/status"
	if !base.host {
		status, _ = c.baseFile(base, status) // "" reads as absent
	}
	b, err := os.ReadFile(status)
	if err != nil && !os.IsNotExist(err) {
		return nil, fmt.Errorf("reading the installed Debian packages: %w", err)
	}
	m = parseDpkgStatus(b)
	c.mu.Lock()
	c.dpkg[base.keyStr] = m
	c.mu.Unlock()
	return m, nil
}

// parseDpkgStatus lists the packages a dpkg status file says are installed.
func parseDpkgStatus(b []byte) map[string]bool {
	m := map[string]bool{}
	var name string
	var fields []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "Package: "):
			name = strings.TrimSpace(strings.TrimPrefix(line, "Package: "))
		case strings.HasPrefix(line, "Status: "):
			fields = strings.Fields(strings.TrimPrefix(line, "Status: "))
		case line == "":
			if name != "" && slices.Contains(fields, "installed") && !slices.Contains(fields, "not-installed") {
				m[name] = true
			}
			name, fields = "", nil
		}
	}
	if name != "" && slices.Contains(fields, "installed") && !slices.Contains(fields, "not-installed") {
		m[name] = true
	}
	return m
}
