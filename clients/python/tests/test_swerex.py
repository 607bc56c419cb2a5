"""SWE-ReX (the real package) on msb: MsbDeployment hands out SWE-ReX's own
RemoteRuntime on the daemon's /swerex/<id> routes, and SWE-agent's calls
go through it as they would to swerex-remote."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from swerex.exceptions import BashIncorrectSyntaxError, CommandTimeoutError, DeploymentNotStartedError
from swerex.runtime.abstract import (BashAction, BashInterruptAction, CloseBashSessionRequest,
                                     Command, CreateBashSessionRequest, ReadFileRequest, UploadRequest,
                                     WriteFileRequest)
from swerex.runtime.remote import RemoteRuntime

import msb
from msb.swerex import MsbDeployment, MsbDeploymentConfig

IID = "demo__calc-1"
FIX = "sed -i 's|^    return s\\[mid\\]$|    return (s[mid - 1] + s[mid]) / 2|' calc/stats.py"


async def test_deployment_drives_a_sandbox_like_swe_agent(tcp_daemon, tmp_path):
    dep = MsbDeploymentConfig(instance_id=IID, swerex_url=tcp_daemon.address, token=tcp_daemon.token).get_deployment()
    with pytest.raises(DeploymentNotStartedError):
        dep.runtime
    await dep.start()
    try:
        rt = dep.runtime
        assert isinstance(rt, RemoteRuntime)
        assert (await dep.is_alive()).is_alive
        sid = dep.sandbox.id
        assert tcp_daemon.client.get_sandbox(sid).labels["harness"] == "swe-rex"
        # What SWE-agent does: a session, its commands, files, a tool bundle.
        await rt.create_session(CreateBashSessionRequest(startup_source=["/root/.bashrc"], startup_timeout=10))
        obs = await rt.run_in_session(BashAction(command="cd /testbed && export A=1", check="silent", timeout=25))
        assert obs.exit_code == 0
        obs = await rt.run_in_session(BashAction(command="echo $A; pwd", check="silent", timeout=25))
        assert obs.output.strip().splitlines() == ["1", "/testbed"]
        with pytest.raises(BashIncorrectSyntaxError):
            await rt.run_in_session(BashAction(command="if then fi (", check="silent", timeout=25))
        with pytest.raises(CommandTimeoutError):
            await rt.run_in_session(BashAction(command="sleep 30", check="silent", timeout=0.5))
        await rt.run_in_session(BashInterruptAction())
        obs = await rt.run_in_session(BashAction(command=FIX + " && echo fixed", check="silent", timeout=25))
        assert obs.output.strip() == "fixed"
        out = await rt.execute(Command(command="git diff --stat", shell=True, cwd="/testbed"))
        assert out.exit_code == 0 and "calc/stats.py" in out.stdout
        await rt.write_file(WriteFileRequest(path="/root/notes/n.txt", content="note\n"))
        assert (await rt.read_file(ReadFileRequest(path="/root/notes/n.txt"))).content == "note\n"
        with pytest.raises(FileNotFoundError):
            await rt.read_file(ReadFileRequest(path="/root/none.txt"))
        bundle = tmp_path / "tools" / "mytool"
        (bundle / "bin").mkdir(parents=True)
        (bundle / "bin" / "hello").write_text("#!/bin/sh\necho hello tool\n")
        (bundle / "bin" / "hello").chmod(0o755)
        await rt.upload(UploadRequest(source_path=str(bundle), target_path="/root/tools/mytool"))
        # A zip keeps no modes (as with swerex-remote): SWE-agent chmods its tools.
        await rt.execute(Command(command="chmod +x /root/tools/mytool/bin/*", shell=True))
        out = await rt.execute(Command(command=["/root/tools/mytool/bin/hello"]))
        assert out.stdout == "hello tool\n"
        await rt.close_session(CloseBashSessionRequest())
        # msb's grading of what the agent did, in a fresh sandbox.
        assert (await dep.evaluate()).outcome == "resolved"
    finally:
        await dep.stop()
    assert tcp_daemon.client.get_sandbox(sid).state == "closed"


def test_needs_tcp(daemon, monkeypatch):
    monkeypatch.delenv("MSB_SOCKET", raising=False)
    with pytest.raises(ValueError, match="TCP"):
        MsbDeployment(instance_id=IID, address=daemon.address)._urls()


def test_config_is_strict():
    with pytest.raises(Exception):
        MsbDeploymentConfig(instance_id=IID, imgae="typo")
    assert isinstance(MsbDeploymentConfig(instance_id=IID).get_deployment(), MsbDeployment)
    assert msb.Client  # the core imports beside the backend



# What test_deployment_over_https runs in a fresh interpreter: aiohttp builds
# its verifying SSL context when imported, so SSL_CERT_FILE must be set first.
HTTPS_RUN = """
import asyncio, os, sys
from msb.swerex import MsbDeploymentConfig
from swerex.runtime.abstract import Command, ReadFileRequest, UploadRequest, WriteFileRequest

async def main(url, token, up):
    dep = MsbDeploymentConfig(instance_id="demo__calc-1", swerex_url=url, token=token).get_deployment()
    await dep.start()
    sid = dep.sandbox.id
    try:
        rt = dep.runtime
        print((await rt.execute(Command(command="pwd", shell=True, cwd="/testbed"))).stdout, end="")
        await rt.write_file(WriteFileRequest(path="/root/notes/n.txt", content="note\\n"))
        print((await rt.read_file(ReadFileRequest(path="/root/notes/n.txt"))).content, end="")
        await rt.upload(UploadRequest(source_path=up, target_path="/root/up"))
        print((await rt.execute(Command(command="cat /root/up/f", shell=True))).stdout, end="")
    finally:
        await dep.stop()
    print(sid)

asyncio.run(main(*sys.argv[1:]))
"""


def test_deployment_over_https(tls_daemon, certs, tmp_path):
    """SWE-ReX's own RemoteRuntime on an https daemon, trusting its CA
    through SSL_CERT_FILE as msb's client does."""
    (tmp_path / "up").mkdir()
    (tmp_path / "up" / "f").write_text("up\n")
    env = dict(os.environ, SSL_CERT_FILE=certs.ca)
    p = subprocess.run([sys.executable, "-c", HTTPS_RUN, tls_daemon.address, tls_daemon.token, str(tmp_path / "up")],
                       capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    lines = p.stdout.splitlines()
    assert lines[:3] == ["/testbed", "note", "up"]
    assert tls_daemon.client.get_sandbox(lines[3]).state == "closed"
