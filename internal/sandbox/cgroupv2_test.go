package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/minisandbox/msb/internal/privtest"
	"github.com/minisandbox/msb/internal/vmtest"
)

// v2Cases are the suite's cases whose outcome depends on the cgroup
// hierarchy or on the kernel's memory and freezer settings, which
// TestCgroupV2 runs in its VM as root and rootless: placement, limits,
// kills, cleanup, the freezer, the disk pool, the supervisor's memory
// (the VM's kernel has transparent huge pages on always) and what a
// sandbox sees of its group. The others (escapes, files, layers,
// sessions, streams, networks) do not read the hierarchy; they run on
// the host in both modes, and in the emulated VM they would cost
// minutes (StreamBackPressure alone takes a minute there rootless).
// HostSecrets besides: the guest has no idmapped mounts (its root is
// overlayfs on 9p), so its root-mode sandboxes read /etc as root, through
// the overlay that hides the masked paths (a 6.1 kernel there).
const v2Cases = "^TestSuite$/^(Basics|HostSecrets|Devices|InitBornInCgroup|ForkBomb|MemoryBomb|MemoryAcrossProcesses|" +
	"SmallMemoryConcurrentExecs|TmpQuota|CloseKillsEverything|Concurrent|GC|GCPidReused|GCOwnerRemoving|GCNewDirs|" +
	"CloseThenRuntimeClose|KilledDuringCleanup|DiskLimit|DiskAdmittedClose|IdleSupervisorFlat|SupervisorTrims|" +
	"MemoryBoundWithoutCgroup|FreezeWritableDir|CgroupFS)$"

// TestCgroupV2 runs the sandbox suite's cgroup cases (v2Cases) on a host
// laid out as most current distributions are, and this one is not: every
// controller on cgroup v2 (package vmtest boots one). First as root; then
// as the unprivileged user in a cgroup delegated to it the way systemd's
// Delegate=yes does (the directory and its cgroup.procs, cgroup.threads
// and cgroup.subtree_control given to the user, the controllers enabled
// above it), with no MSB_CGROUP_PARENT: msb must find that cgroup itself;
// last, the limit cases as the user under a real systemd user manager
// (with its session bus), started as a transient service that holds
// another process too, as a terminal's shell would: msb must ask the
// manager for a scope of its own (cgroup.JoinSystemdScope). Between the first two, the limit cases as root
// alone in a container's cgroup namespace (a Kubernetes DaemonSet's msb
// serve), whose top is not the hierarchy's root. In every run every runtime
// must have found cgroup v2 (MSB_TEST_WANT_CGROUP).
func TestCgroupV2(t *testing.T) {
	for _, p := range []string{vmtest.SystemdBinary, "/usr/bin/systemd-run", "/usr/bin/dbus-daemon", "/usr/bin/setpriv"} {
		if _, err := os.Stat(p); err != nil {
			privtest.Skip(t, "the VM's user manager needs %s (apt-get install systemd dbus-daemon util-linux)", p)
		}
	}
	console := bootV2(t, false, v2Script)
	for _, mode := range []string{"root", "root in a cgroup namespace", "rootless", "rootless under systemd"} {
		if !strings.Contains(string(console), "cgroup v2 "+mode+": ok") {
			t.Errorf("no %q in the console: the %s run did not finish", "cgroup v2 "+mode+": ok", mode)
		}
	}
	// In the namespace, msb moved itself out of the namespace's top (not
	// the hierarchy's root) to hand the controllers down.
	if !strings.Contains(string(console), "Leaf:/sys/fs/cgroup/msb-self ") {
		t.Errorf("no runtime in the cgroup namespace moved into /sys/fs/cgroup/msb-self")
	}
	// The last run's runtimes found their groups in the scope msb asked
	// the user manager for.
	if !scopeParents.Match(console) {
		t.Errorf("no runtime of the systemd run made its groups in an msb-PID.scope")
	}
}

// TestCaseLists: the case lists that the VM and the delegated reruns pass
// to -test.run name only cases of the suite, so a renamed case cannot
// drop out of them unseen.
func TestCaseLists(t *testing.T) {
	names := map[string]bool{}
	for _, c := range suiteCases {
		names[c.name] = true
	}
	for _, list := range []string{v2Cases, delegatedCases} {
		inner := strings.TrimSuffix(strings.TrimPrefix(list, "^TestSuite$/^("), ")$")
		for _, name := range strings.Split(inner, "|") {
			if !names[name] {
				t.Errorf("%q names %q, which is not a case of the suite", list, name)
			}
		}
	}
}

// v2Script is what the guest runs (see TestCgroupV2), each run with its own
// state dir on the guest's /tmp (a tmpfs: an overlay's upper dir cannot be
// on 9p).
func v2Script(exe string) string {
	return v2Vars(exe).Replace(v2Prelude + `echo "== cgroup v2, root"
mkdir /tmp/root-state
env $WANT $STRICT $ROOT $BASE=/tmp/root-state TMPDIR=/tmp/root-state $RUN
echo "cgroup v2 root: ok"

echo "== cgroup v2, root alone in a container's cgroup namespace"
mkdir /sys/fs/cgroup/ctr /tmp/ns-state
sh -c "echo \$\$ > /sys/fs/cgroup/ctr/cgroup.procs && exec \"\$@\"" sh unshare --cgroup --mount \
  sh -c 'umount /sys/fs/cgroup && mount -t cgroup2 cgroup2 /sys/fs/cgroup && exec "$@"' sh env $WANT $STRICT $ROOT $BASE=/tmp/ns-state TMPDIR=/tmp/ns-state $SCOPERUN
echo "cgroup v2 root in a cgroup namespace: ok"

echo "== cgroup v2, rootless in a delegated cgroup"
uid=$(id -u $USER)
mgr=/sys/fs/cgroup/user.slice/user-$uid.slice/user@$uid.service
slice=$mgr/app.slice
cg=$slice/msb-test.scope
mkdir -p $cg
for d in /sys/fs/cgroup /sys/fs/cgroup/user.slice /sys/fs/cgroup/user.slice/user-$uid.slice $mgr $slice; do
  echo "+memory +pids +cpu" > $d/cgroup.subtree_control
done
chown $USER: $cg $cg/cgroup.procs $cg/cgroup.threads $cg/cgroup.subtree_control
state=/tmp/rootless-state
mkdir $state && chown $USER: $state
sh -c "echo \$\$ > $cg/cgroup.procs && exec setpriv --reuid=$USER --regid=$USER --init-groups \
  env -i PATH=$PATH HOME=/home/$USER $WANT $STRICT $BASE=$state TMPDIR=$state $RUN"
echo "cgroup v2 rootless: ok"
rmdir $cg/msb-self $cg/msb $cg $slice  # the user manager makes its own tree,
echo "-memory -pids -cpu" > $mgr/cgroup.subtree_control  # and lives in its top

echo "== cgroup v2, rootless under a systemd user manager, in a service with another process"
mkdir -p /run/systemd/system  # systemd --user starts only where the system looks booted by systemd
rt=/run/user/$uid
mkdir -p $rt && chown $USER: $rt && chmod 700 $rt
chown $USER: $mgr $mgr/cgroup.procs $mgr/cgroup.threads $mgr/cgroup.subtree_control
as_user="setpriv --reuid=$USER --regid=$USER --init-groups env -i PATH=$PATH HOME=/home/$USER XDG_RUNTIME_DIR=$rt DBUS_SESSION_BUS_ADDRESS=unix:path=$rt/bus"
sh -c "echo \$\$ > $mgr/cgroup.procs && exec $as_user sh -c 'dbus-daemon --session --address=unix:path=$rt/bus --fork && exec $SYSTEMD --user'" \
  </dev/null >/tmp/user-manager.log 2>&1 &
up=
for i in $(seq 120); do
  if $as_user systemctl --user is-system-running 2>/dev/null | grep -qE 'running|degraded'; then up=1; break; fi
  sleep 0.5
done
[ -n "$up" ] || { echo "the user manager did not start:"; cat /tmp/user-manager.log; exit 1; }
state=/tmp/scope-state
mkdir $state && chown $USER: $state
$as_user systemd-run --user --quiet --wait --pipe --collect -E PATH=$PATH -E $WANT -E $STRICT -E $BASE=$state -E TMPDIR=$state \
  sh -c "sleep 1000 & exec $SCOPERUN" </dev/null
echo "cgroup v2 rootless under systemd: ok"
`)
}

// v2Prelude starts every guest script: errors stop it, its output goes
// to the console, the modules the sandboxes need are loaded and the
// unprivileged user exists.
const v2Prelude = `set -eu
exec 2>&1
modprobe loop
modprobe btrfs
modprobe tun  # /dev/net/tun, for the sandboxes' eth0,
chmod 666 /dev/net/tun  # everyone's, as udev makes it
id -u $USER >/dev/null 2>&1 || useradd --create-home --shell /bin/bash $USER
`

// v2Vars fills in what the guest's scripts name: the test binary's runs
// ($RUN: the suite's cgroup cases; $SCOPERUN: its limit cases), the
// variables they need, and the unprivileged user. Each run's own timeout,
// ten minutes (a run takes one or two here under load), ends a stuck run
// with its goroutines on the console, before the VM's limit (bootV2) ends
// the guest with nothing said.
func v2Vars(exe string) *strings.Replacer {
	return strings.NewReplacer(
		"$SCOPERUN", fmt.Sprintf("%s -test.run '%s' -test.count=1 -test.timeout=10m -test.v", exe, delegatedCases),
		"$RUN", fmt.Sprintf("%s -test.run '%s' -test.count=1 -test.timeout=10m -test.v", exe, v2Cases),
		"$WANT", wantCgroupEnv+"=v2",
		"$STRICT", privtest.StrictEnv+"="+os.Getenv(privtest.StrictEnv),
		"$ROOT", privtest.RequireRootEnv+"=1",
		"$BASE", privtest.StateBaseEnv,
		"$USER", privtest.User,
		"$SYSTEMD", vmtest.SystemdBinary)
}

// scopeParents is how a runtime's groups read (in the suite's -test.v log)
// when they are in the scope msb asked the user manager for.
var scopeParents = regexp.MustCompile(`Parents:map\[:/sys/fs/cgroup/user\.slice/user-\d+\.slice/user@\d+\.service/app\.slice/msb-\d+\.scope/msb\]`)

// bootV2 boots the cgroup v2 VM (with systemd as its system manager when
// systemd is set), runs the script that script makes of the path of this
// test binary's copy there, and returns the console; it fails t unless the
// script exits 0.
func bootV2(t *testing.T, systemd bool, script func(exe string) string) []byte {
	t.Helper()
	privtest.RequireRoot(t)
	if os.Getenv(privtest.StateBaseEnv) != "" {
		t.Skip("already the rootless rerun")
	}
	k, err := vmtest.Available()
	if err != nil {
		privtest.Skip(t, "%v", err)
	}
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	exe := filepath.Join(dir, "sandbox.test")
	privtest.CopyExecutable(t, "/proc/self/exe", exe)
	path := filepath.Join(dir, "run.sh")
	if err := os.WriteFile(path, []byte(script(exe)), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	// One CPU: as fast as two here under load, at half the host's CPU, and
	// no guest spinning on a lock whose holder's emulated CPU the busy
	// host has descheduled.
	var stamped bytes.Buffer
	res, err := vmtest.Run(ctx, vmtest.Options{Kernel: k, Init: exe, Script: path, Share: dir, Systemd: systemd, MemoryMiB: 3072, CPUs: 1,
		Console: vmtest.Stamped(&stamped)})
	t.Logf("the VM's console, each line stamped with the seconds since the boot began:\n%s", stamped.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("the guest's script failed (exit %d): see the console above", res.ExitCode)
	}
	return res.Console
}

// TestCgroupV2LoginSession runs the limit cases as the unprivileged user
// logged in the way ssh logs one in on a systemd host: systemd is PID 1,
// and PAM's session stack (runuser -l, through pam_systemd) puts the user's
// shell in a session scope of logind's, which belongs to root and holds the
// shell, with the user's manager and session bus started for the session.
// msb may not use that scope; it must ask the user manager for one of its
// own, and the user manager, which cannot move a process out of a root
// scope, asks the system manager to (cgroup.JoinSystemdScope).
func TestCgroupV2LoginSession(t *testing.T) {
	if err := vmtest.SystemdAvailable(); err != nil {
		privtest.Skip(t, "%v", err)
	}
	console := bootV2(t, true, loginScript)
	if !regexp.MustCompile(`msb started in 0::/user\.slice/user-\d+\.slice/session-\w+\.scope`).Match(console) {
		t.Errorf("the runs did not start in a login session's scope")
	}
	if !strings.Contains(string(console), "cgroup v2 rootless in a login session: ok") {
		t.Errorf("the login session's run did not finish")
	}
	if !scopeParents.Match(console) {
		t.Errorf("no runtime of the login session made its groups in an msb-PID.scope")
	}
}

// loginScript is what TestCgroupV2LoginSession's guest runs.
func loginScript(exe string) string {
	return v2Vars(exe).Replace(v2Prelude + `state=/tmp/login-state
mkdir $state && chown $USER: $state
runuser -l $USER -c "echo msb started in \$(cat /proc/self/cgroup); exec env $WANT $STRICT $BASE=$state TMPDIR=$state $SCOPERUN" </dev/null
echo "cgroup v2 rootless in a login session: ok"
`)
}
