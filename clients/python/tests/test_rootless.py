"""The client of a rootless daemon: ``msb serve`` run by an unprivileged
user on its default socket (found the way the CLI finds it), sandboxes
through a user namespace."""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time

import pytest

import msb
from msb._transport import default_socket

from conftest import msb_bin

USER = "msbtest"  # the unprivileged user of the repository's rootless suites (internal/privtest)


@pytest.fixture
def rootless_daemon():
    if os.geteuid() != 0:
        # Not root: the session's daemon is itself rootless (test_mode_of_session_daemon).
        if os.environ.get("MSB_TEST_REQUIRE_ROOT") == "1":
            pytest.fail("MSB_TEST_REQUIRE_ROOT=1, but the tests do not run as root")
        pytest.skip("starting a daemon as another user needs root")
    try:
        u = pwd.getpwnam(USER)
    except KeyError:
        subprocess.run(["useradd", "--create-home", "--shell", "/bin/bash", USER], check=True)
        u = pwd.getpwnam(USER)
    d = tempfile.mkdtemp(prefix="msb-rootless-")
    os.chmod(d, 0o755)
    bindir, runtime = os.path.join(d, "bin"), os.path.join(d, "run")
    os.makedirs(bindir)
    os.makedirs(runtime, mode=0o700)
    for name in ("msb", "msb-full", "msb-sandbox"):
        src = os.path.join(os.path.dirname(msb_bin()), name)
        if os.path.exists(src):
            shutil.copy2(src, os.path.join(bindir, name))
    os.chown(runtime, u.pw_uid, u.pw_gid)
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": u.pw_dir, "XDG_RUNTIME_DIR": runtime,
           "TMPDIR": runtime, "MSB_CACHE": os.path.join(runtime, "cache")}
    log = open(os.path.join(d, "serve.log"), "wb")
    proc = subprocess.Popen([os.path.join(bindir, "msb"), "serve"], env=env, stdout=log, stderr=log,
                            stdin=subprocess.DEVNULL, user=u.pw_uid, group=u.pw_gid, extra_groups=[])
    sock = default_socket({"XDG_RUNTIME_DIR": runtime}, u.pw_uid)
    deadline = time.monotonic() + 60
    while not os.path.exists(sock):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"rootless msb serve did not start: {open(log.name).read()[-3000:]}")
        time.sleep(0.05)
    yield msb.Client(sock)
    proc.send_signal(signal.SIGTERM)
    code = proc.wait(timeout=60)
    log.close()
    text = open(log.name, errors="replace").read()[-3000:]
    shutil.rmtree(d, ignore_errors=True)
    assert code == 0, f"rootless msb serve exited {code} on SIGTERM:\n{text}"


def test_rootless_daemon_on_its_default_socket(rootless_daemon):
    c = rootless_daemon
    assert c.health().mode == "rootless"
    with c.create_sandbox(host_base=True) as sb:
        r = sb.exec("id -u; cat /proc/self/uid_map | awk '{print $2}'")
        inside, outside = r.stdout.split()
        assert inside == "0" and outside == str(pwd.getpwnam(USER).pw_uid)
        s = sb.session()
        s.exec("cd /tmp && X=1")
        assert s.exec("echo $X; pwd").stdout == "1\n/tmp\n"


def test_mode_of_session_daemon(client):
    assert client.health().mode == ("root" if os.geteuid() == 0 else "rootless")
