"""The client over https (conftest's ``tls_daemon``: a certificate for
127.0.0.1 signed by a CA made with the openssl command): sync and asyncio
clients trust it through ``ca_file=`` or SSL_CERT_FILE, and refuse it,
naming what to do, without."""

from __future__ import annotations

import asyncio

import pytest

import msb
import msb.aio

IID = "demo__calc-1"


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
