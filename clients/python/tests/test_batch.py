"""Batch create against a real daemon: ``create_sandboxes`` (sync and
asyncio) gives n distinct sandboxes in one call."""

from __future__ import annotations

import asyncio

import pytest

import msb
import msb.aio

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
