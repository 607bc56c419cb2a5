"""The README's examples, run in order as pasted: its sh blocks in bash
(the demo, a daemon), then its python blocks in one interpreter, with the
README's TCP port and socket path replaced by free ones."""

from __future__ import annotations

import contextlib
import io
import os
import re
import signal
import subprocess
import time

import pytest

from conftest import REPO, free_port

README = os.path.join(os.path.dirname(__file__), "..", "README.md")


def blocks(path: str):
    """(info, body) of each fenced block."""
    out, cur, info = [], None, ""
    for line in open(path, encoding="utf-8"):
        if line.startswith("```"):
            if cur is None:
                cur, info = [], line[3:].strip()
            else:
                out.append((info, "".join(cur)))
                cur = None
        elif cur is not None:
            cur.append(line)
    assert cur is None, "unclosed block"
    return out


def test_readme_examples(tmp_path, monkeypatch):
    port, sock = str(free_port()), str(tmp_path / "msb.sock")
    fix = lambda body: body.replace("127.0.0.1:7777", f"127.0.0.1:{port}").replace("/tmp/msb.sock", sock)  # noqa: E731
    (tmp_path / "bin").symlink_to(os.path.join(REPO, "bin"))
    monkeypatch.chdir(tmp_path)
    env = dict(os.environ, MSB_STATE_DIR=str(tmp_path / "state"))
    pid = None
    try:
        ran = 0
        for info, body in blocks(README):
            if info == "sh":
                # Output to a file, not a pipe: a daemon started in the
                # background keeps its stdout open.
                with open(tmp_path / "block.log", "w+") as log:
                    p = subprocess.run(["bash", "-euo", "pipefail", "-c", fix(body) + "\necho $! > serve.pid\n"
                                        if "&" in body else fix(body)], env=env, stdout=log, stderr=log)
                    log.seek(0)
                    assert p.returncode == 0, f"{body}\n{log.read()[-5000:]}"
                if (tmp_path / "serve.pid").exists():
                    pid = int((tmp_path / "serve.pid").read_text())
                    for line in body.splitlines():
                        m = re.match(r"export (\w+)=(\S+)", line.strip())
                        if m:
                            monkeypatch.setenv(m.group(1), fix(m.group(2)))
                    deadline = time.monotonic() + 60
                    while not os.path.exists(sock):
                        assert os.path.exists(f"/proc/{pid}"), \
                            f"the README's daemon exited:\n{(tmp_path / 'block.log').read_text()[-3000:]}"
                        assert time.monotonic() < deadline, "the README's daemon did not start"
                        time.sleep(0.05)
                ran += 1
            elif info == "python":
                with contextlib.redirect_stdout(io.StringIO()):
                    exec(compile(fix(body), f"README block {ran}", "exec"), {"__name__": "__readme__"})
                ran += 1
            else:
                assert info in ("sh notest", ""), f"block {info!r}: use sh, sh notest or python"
        assert ran >= 5, "the README lost its examples"
    finally:
        if pid and os.path.exists(f"/proc/{pid}"):
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + 60
            while os.path.exists(f"/proc/{pid}"):
                if time.monotonic() > deadline:
                    os.kill(pid, signal.SIGKILL)
                    pytest.fail("the README's daemon did not exit on SIGTERM")
                time.sleep(0.1)
