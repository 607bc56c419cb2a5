package e2b

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/minisandbox/msb/internal/engine"
	"github.com/minisandbox/msb/internal/server/e2b/envd/process"
	"github.com/minisandbox/msb/internal/server/e2b/envd/process/processconnect"
)

// runAs is run for the user the RPC names (the SDK's user=...); "": the
// sandbox's default user.
func (c envdClient) runAs(t *testing.T, cfg *process.ProcessConfig, user string) (stdout string, code int32) {
	t.Helper()
	r := req(c, &process.StartRequest{Process: cfg})
	if user != "" {
		r.Header().Set("Authorization", "Basic "+basicAuth(user))
	}
	s, err := processconnect.NewProcessClient(http.DefaultClient, c.url).Start(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var out strings.Builder
	for s.Receive() {
		ev := s.Msg().GetEvent()
		out.Write(ev.GetData().GetStdout())
		if end := ev.GetEnd(); end != nil {
			return out.String(), end.GetExitCode()
		}
	}
	t.Fatalf("%v as %s: the stream ended without an end event: %v", cfg, user, s.Err())
	return "", 0
}

// basicAuth is the credentials of a Basic Authorization header naming
// user with no password, as the SDK sends them.
func basicAuth(user string) string {
	r := &http.Request{Header: http.Header{}}
	r.SetBasicAuth(user, "")
	return strings.TrimPrefix(r.Header.Get("Authorization"), "Basic ")
}

// userProbe prints what a command can see of who it runs as and of the
// shell it runs in, with the tools of importUserImage's image; pipe
// inode numbers and the shell's pid are left out.
const userProbe = `echo "$0|$SHLVL|${FROM_PROFILE-}|$LINENO|$-|$PWD|$HOME|$USER|$LOGNAME|$(whoami)|$(id)|$(umask)|$EUID|$UID|${GROUPS[*]}"
grep -E '^(Uid|Gid|Groups|CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs)' /proc/$$/status
cd /proc/$$/fd && for f in *; do l=$(stat -c %N "$f"); echo "${l//[0-9]/}"; done; cd ~
compgen -v | grep -v '^\(_\|BASHPID\|RANDOM\|SRANDOM\|EPOCHREALTIME\|EPOCHSECONDS\|PIPESTATUS\|SECONDS\|OLDPWD\|BASH_COMMAND\)$'
compgen -A function
shopt -s
set -o | grep on
trap -p
exit 5`

// TestE2BPrimedUser: on a base whose commands run as E2B's `user`
// (setpriv from the sandbox's root), a command of commands.run's form
// after another one runs in a shell primed as that user and sees exactly
// what it saw in a shell of its own: who it is, its groups, capabilities,
// HOME, USER, LOGNAME, the user's profile, umask, open descriptors (not
// the one the primed shell read its command on), variables, options. A
// command for root after one for `user` does not take the user's primed
// shell, nor one for `user` after root's; the next command for the same
// user does.
func TestE2BPrimedUser(t *testing.T) {
	url, _ := startFrontWith(t, func(e *engine.Engine, f *Front) {
		importUserImage(t, e)
		if err := f.UseBase(context.Background(), userImage); err != nil {
			t.Fatal(err)
		}
	})
	c := createSandbox(t, url)
	c.sh(t, `printf 'export FROM_PROFILE=yes\n' > ~/.profile`)
	fresh, freshCode := c.runAs(t, login(userProbe, ""), "")
	if n := c.primedStarts(t); n != 0 {
		t.Fatalf("%d processes started in a primed shell before any login command ended, want 0", n)
	}
	primed, primedCode := c.runAs(t, login(userProbe, ""), "")
	if n := c.primedStarts(t); n != 1 {
		t.Fatalf("the second command as user: %d processes started in a primed shell, want 1", n)
	}
	if primed != fresh || primedCode != freshCode {
		t.Errorf("as user in a primed shell the probe printed\n%s\nexit %d; in a shell of its own\n%s\nexit %d", primed, primedCode, fresh, freshCode)
	}
	wantHead := "/bin/bash|1|yes|1|hBc|/home/user|/home/user|user|user|user|uid=1000(user) gid=1000(user) groups=1000(user)|0022|1000|1000|1000\n"
	if !strings.HasPrefix(fresh, wantHead) || freshCode != 5 {
		t.Errorf("the probe as user printed\n%s\nexit %d; want it to start %q, exit 5", fresh, freshCode, wantHead)
	}

	steps := []struct {
		user, want string
		primed     int // processes started in primed shells after the step
	}{
		{"root", "root|/root|0\n", 1},         // the user's primed shell is not root's
		{"root", "root|/root|0\n", 2},         // root's own
		{"user", "user|/home/user|1000\n", 2}, // root's is not the user's
		{"", "user|/home/user|1000\n", 3},     // the default user is `user`
	}
	for i, s := range steps {
		out, code := c.runAs(t, login(`echo "$(whoami)|$HOME|$(id -u)"`, ""), s.user)
		if out != s.want || code != 0 {
			t.Errorf("step %d, as %q: %q exit %d, want %q", i, s.user, out, code, s.want)
		}
		if n := c.primedStarts(t); n != s.primed {
			t.Errorf("step %d, as %q: %d processes started in primed shells, want %d", i, s.user, n, s.primed)
		}
	}
}
