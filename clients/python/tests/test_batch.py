"""Batch create against a real daemon: ``create_sandboxes`` (sync and
asyncio) gives n distinct sandboxes in one call."""

from __future__ import annotations

import asyncio
import os
import time
import urllib.request

import pytest

import msb
import msb.aio
from conftest import _finish, _start, free_port

IID = "demo__calc-1"


def test_create_sandboxes(client):
    sbs = client.create_sandboxes(3, IID, labels={"suite": "batch"})
    try:
        assert len({sb.id for sb in sbs}) == 3
        assert all(sb.info.instance_id == IID and sb.info.labels == {"suite": "batch"} for sb in sbs)
        sbs[0].exec("echo mine > /testbed/only-first.txt")
        assert sbs[1].exec("test -e /testbed/only-first.txt").exit_code == 1
        assert {s.id for s in client.list_sandboxes({"suite": "batch"})} == {sb.id for sb in sbs}
    finally:
        for sb in sbs:
            sb.close()
    with pytest.raises(ValueError):
        client.create_sandboxes(0, IID)
    with pytest.raises(msb.BadRequest):
        client.create_sandboxes(257, IID)


async def test_async_create_sandboxes(daemon):
    async with msb.aio.Client(daemon.address) as c:
        sbs = await c.create_sandboxes(2, host_base=True)
        try:
            assert len({sb.id for sb in sbs}) == 2
            outs = await asyncio.gather(*(sb.exec("echo ok") for sb in sbs))
            assert [o.stdout for o in outs] == ["ok\n", "ok\n"]
        finally:
            for sb in sbs:
                await sb.close()



def test_fork_snapshot_warm(tmp_root, demo):
    """A daemon with --spares keeps a snapshot's warm children: the next
    fork takes them (its metrics count the hits), with the snapshot's state."""
    token = "warm-" + os.urandom(8).hex()
    d = _start(tmp_root, "warm", demo, f"127.0.0.1:{free_port()}", token=token, extra=["--spares", "2"])

    def metrics() -> str:
        req = urllib.request.Request(d.address + "/metrics", headers={"Authorization": f"Bearer {token}"})
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.read().decode()

    c = d.client
    src = c.create_sandbox(host_base=True)
    src.exec("mkdir /data && echo base > /data/state.txt")
    c.snapshot(src.id, "py-warm")
    src.close()
    kids = c.fork_snapshot("py-warm", 1, warm=2)
    deadline = time.monotonic() + 60
    while 'msb_pool_spares{kind="snapshot",state="ready"} 2\n' not in metrics():
        assert time.monotonic() < deadline, metrics()
        time.sleep(0.05)
    kids += c.fork_snapshot("py-warm", 2, labels={"warm": "1"})
    try:
        assert len({k.id for k in kids}) == 3
        assert [k.exec("cat /data/state.txt").stdout for k in kids] == ["base\n"] * 3
        assert 'msb_pool_total{event="hit",kind="snapshot"} 2\n' in metrics()
    finally:
        for k in kids:
            k.close()
        c.delete_snapshot("py-warm")
        _finish(d)


def test_create_warm(tmp_root, demo):
    """A create with ``warm`` has the daemon (--spares) keep that many
    sandboxes of the instance started ahead: a batch create takes them
    (its metrics count the hits), each fresh."""
    token = "warmc-" + os.urandom(8).hex()
    d = _start(tmp_root, "warmc", demo, f"127.0.0.1:{free_port()}", token=token, extra=["--spares", "2"])

    def metrics() -> str:
        req = urllib.request.Request(d.address + "/metrics", headers={"Authorization": f"Bearer {token}"})
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.read().decode()

    c = d.client
    sbs = [c.create_sandbox(IID, warm=2)]
    try:
        sbs[0].exec("echo dirty > /testbed/LEFT")
        deadline = time.monotonic() + 60
        while 'msb_pool_spares{kind="instance",state="ready"} 2\n' not in metrics():
            assert time.monotonic() < deadline, metrics()
            time.sleep(0.05)
        sbs += c.create_sandboxes(2, IID, labels={"warm": "1"})
        assert len({sb.id for sb in sbs}) == 3
        assert [sb.exec("test -e /testbed/LEFT").exit_code for sb in sbs[1:]] == [1, 1]
        assert 'msb_pool_total{event="hit",kind="instance"} 2\n' in metrics()
    finally:
        for sb in sbs:
            sb.close()
        _finish(d)
