"""The client over https: a daemon started with ``--tls-cert/--tls-key``
whose certificate (for 127.0.0.1) is signed by a CA the test makes with the
openssl command; sync and asyncio clients trust it through ``ca_file=`` or
SSL_CERT_FILE, and refuse it, naming what to do, without."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from dataclasses import dataclass
from typing import Iterator

import pytest

import msb
import msb.aio

IID = "demo__calc-1"

LEAF_EXT = """\
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1, DNS:localhost
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
"""


@dataclass
class Certs:
    """A throwaway CA and a server certificate it signed (PEM files)."""

    ca: str
    cert: str
    key: str
    other_ca: str


def _openssl(*args: str) -> None:
    p = subprocess.run(["openssl", *args], capture_output=True, text=True)
    if p.returncode != 0:
        pytest.fail(f"openssl {' '.join(args)} failed ({p.returncode}):\n{p.stderr[-2000:]}")


def _make_ca(d: str, name: str) -> str:
    key, pem = os.path.join(d, f"{name}.key"), os.path.join(d, f"{name}.pem")
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", key, "-out", pem, "-days", "2", "-subj", f"/CN=msb test {name}",
             "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    return pem


@pytest.fixture(scope="module")
def certs(tmp_root: str) -> Certs:
    if shutil.which("openssl") is None:
        pytest.fail("the TLS tests make their certificates with the openssl command: install openssl")
    d = os.path.join(tmp_root, "tls-certs")
    os.makedirs(d, exist_ok=True)
    ca = _make_ca(d, "ca")
    other = _make_ca(d, "other-ca")
    key, csr, cert, ext = (os.path.join(d, n) for n in ("srv.key", "srv.csr", "srv.pem", "srv.ext"))
    with open(ext, "w") as f:
        f.write(LEAF_EXT)
    _openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", key, "-out", csr, "-subj", "/CN=127.0.0.1")
    _openssl("x509", "-req", "-in", csr, "-CA", ca, "-CAkey", os.path.join(d, "ca.key"), "-CAcreateserial",
             "-out", cert, "-days", "2", "-extfile", ext)
    return Certs(ca=ca, cert=cert, key=key, other_ca=other)


@pytest.fixture(scope="module")
def tls_daemon(tmp_root, demo, certs) -> Iterator:
    from conftest import _finish, _start, free_port

    dm = _start(tmp_root, "tls", demo, f"127.0.0.1:{free_port()}", token="s3cret-" + os.urandom(8).hex(),
                extra=["--tls-cert", certs.cert, "--tls-key", certs.key], ca_file=certs.ca)
    yield dm
    _finish(dm)


def test_https_sync(tls_daemon, certs):
    c = tls_daemon.client
    assert c.address.tls and c.health().status == "ok"
    with pytest.raises(msb.Unauthorized):
        msb.Client(tls_daemon.address, token="wrong", ca_file=certs.ca).list_sandboxes()
    with c.create_sandbox(IID) as sb:
        assert sb.exec("echo over tls").stdout == "over tls\n"
        evs = list(sb.exec_stream("echo a; sleep 0.2; echo b"))
        assert evs[-1].type == "result" and evs[-1].result.stdout == "a\nb\n"
        sb.write_file("/testbed/x.txt", "x" * 200_000)
        assert sb.read_text("/testbed/x.txt") == "x" * 200_000
        s = sb.session("main")
        s.exec("cd calc")
        assert s.exec("pwd").stdout == "/testbed/calc\n"


async def test_https_async(tls_daemon, certs):
    async with msb.aio.Client(tls_daemon.address, token=tls_daemon.token, ca_file=certs.ca) as c:
        assert (await c.health()).status == "ok"
        async with await c.create_sandbox(IID) as sb:
            rs = await asyncio.gather(*(sb.exec(f"echo {i}; sleep 0.1") for i in range(4)))
            assert [r.stdout for r in rs] == [f"{i}\n" for i in range(4)]
            evs = [ev async for ev in sb.exec_stream("echo a; sleep 0.2; echo b")]
            assert evs[-1].type == "result" and evs[-1].result.stdout == "a\nb\n"
            await sb.write_file("/testbed/y.txt", "y" * 200_000)
            assert await sb.read_text("/testbed/y.txt") == "y" * 200_000


def test_https_ssl_cert_file(tls_daemon, certs, monkeypatch):
    monkeypatch.setenv("SSL_CERT_FILE", certs.ca)
    assert msb.Client(tls_daemon.address, token=tls_daemon.token).health().status == "ok"


def test_https_untrusted_is_refused(tls_daemon, certs, monkeypatch):
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    for ca in (None, certs.other_ca):
        with pytest.raises(msb.DaemonUnreachable, match="certificate verify failed.*not trusted: pass its CA"):
            msb.Client(tls_daemon.address, token=tls_daemon.token, ca_file=ca).health()

    async def go() -> None:
        async with msb.aio.Client(tls_daemon.address, token=tls_daemon.token, ca_file=certs.other_ca) as c:
            await c.health()
    with pytest.raises(msb.DaemonUnreachable, match="not trusted: pass its CA"):
        asyncio.run(go())


def test_https_bad_ca_file(tmp_path):
    bad = tmp_path / "ca.pem"
    bad.write_text("not a certificate\n")
    with pytest.raises(ValueError, match="ca_file .*ca.pem"):
        msb.Client("https://127.0.0.1:1", ca_file=str(bad))


def test_http_to_a_tls_daemon(tls_daemon):
    plain = tls_daemon.address.replace("https://", "http://")
    with pytest.raises(msb.BadRequest, match="HTTP request to an HTTPS server"):
        msb.Client(plain, token=tls_daemon.token).health()
