"""Snapshots, forks and rollbacks against a real daemon: the client (sync
and asyncio), the gym environment's branching, and rLLM's snapshot triad."""

from __future__ import annotations

import asyncio

import pytest

import msb
import msb.aio
from msb.gym import MsbEnv
from msb.rllm import (SnapshotNotFound, WarmPool, build_snapshot, create_sandbox, delete_snapshot,
                      snapshot_absent)

IID = "demo__calc-1"

#: which of the test's marker files a sandbox has, and whether the file the
#: test deletes is still there
STATE = ("cd /testbed && for f in before.txt after.txt child.txt calc/text.py; do "
         "test -e $f && printf '%s ' $f; done; echo")


def state(sb) -> str:
    return sb.exec(STATE).stdout


def test_snapshot_fork_rollback(client):
    sb = client.create_sandbox(IID, labels={"suite": "snapshot"})
    kids = []
    try:
        sh = sb.session("main")
        sh.exec("cd /testbed/calc && export STEP=1")
        sb.exec("echo 1 > /testbed/before.txt && rm /testbed/calc/text.py")
        snap = sb.snapshot("py-step1")
        assert (snap.name, snap.sandbox, snap.instance_id) == ("py-step1", sb.id, IID) and snap.layer
        [main] = [s for s in snap.sessions if s.name == "main"]
        assert main.cwd == "/testbed/calc" and "STEP=1" in main.env
        assert "py-step1" in [s.name for s in client.snapshots()]
        with pytest.raises(msb.Conflict):
            sb.snapshot("py-step1")

        sb.exec("echo 2 > /testbed/after.txt")
        kids = sb.fork(2, labels={"branch": "b"})
        assert len(kids) == 2 and all(isinstance(k, msb.Sandbox) for k in kids)
        for k in kids:
            assert k.info.labels == {"suite": "snapshot", "branch": "b"} and k.info.instance_id == IID
            assert state(k) == "before.txt after.txt \n"
            assert k.exec('echo "$PWD $STEP"', session="main").stdout == "/testbed/calc 1\n"
        kids[0].exec("echo c > /testbed/child.txt")
        assert state(kids[1]) == state(sb) == "before.txt after.txt \n"  # isolated

        [old] = sb.fork(snapshot="py-step1")
        kids.append(old)
        assert state(old) == "before.txt \n"

        sh.exec("cd / && export STEP=2")
        info = sb.rollback("py-step1")
        assert info.id == sb.id and info.state == "running" and sb.info is info
        assert state(sb) == "before.txt \n"
        assert sh.exec('echo "$PWD $STEP"').stdout == "/testbed/calc 1\n"
        sb.rollback()
        assert state(sb) == "calc/text.py \n"

        with pytest.raises(msb.NotFound):
            sb.rollback("py-none")
        with pytest.raises(msb.BadRequest):
            sb.fork(-1)
    finally:
        for k in kids:
            k.close()
        sb.close()
    # The named snapshot outlives its sandbox; deleting it leaves its forks running.
    [orphan] = client.fork_snapshot("py-step1")
    try:
        assert state(orphan) == "before.txt \n"
        client.delete_snapshot("py-step1")
        assert "py-step1" not in [s.name for s in client.snapshots()]
        assert state(orphan) == "before.txt \n"
    finally:
        orphan.close()
    with pytest.raises(msb.NotFound):
        client.delete_snapshot("py-step1")
    with pytest.raises(msb.SandboxGone):
        client.snapshot(sb.id)


async def test_async_snapshot_fork_rollback(daemon):
    async with msb.aio.Client(daemon.address) as c:
        async with await c.create_sandbox(IID) as sb:
            await sb.exec("echo 1 > /testbed/before.txt")
            snap = await sb.snapshot("py-async")
            try:
                assert snap.name == "py-async" and "py-async" in [s.name for s in await c.snapshots()]
                await sb.exec("echo 2 > /testbed/after.txt")
                kids = await sb.fork(2)
                kids += await c.fork_snapshot("py-async")
                try:
                    outs = await asyncio.gather(*(k.exec(STATE) for k in kids))
                    assert [o.stdout for o in outs] == ["before.txt after.txt calc/text.py \n"] * 2 + \
                        ["before.txt calc/text.py \n"]
                finally:
                    await asyncio.gather(*(k.close() for k in kids))
                await sb.rollback("py-async")
                assert (await sb.exec(STATE)).stdout == "before.txt calc/text.py \n"
            finally:
                await c.delete_snapshot("py-async")


def test_gym_branching(client):
    with MsbEnv(client, max_steps=10) as env:
        env.reset(IID)
        env.step("cd calc && export X=1")
        env.step("echo 1 > /testbed/before.txt")
        mark = env.snapshot()
        assert mark in [s.name for s in client.snapshots()]
        env.step("echo 2 > /testbed/after.txt")
        kids = env.fork(2)
        try:
            assert len(kids) == 2 and {k.episode.sandbox_id for k in kids}.isdisjoint({env.episode.sandbox_id})
            for k in kids:
                assert k.steps == env.steps == 3
                o, r, done, _ = k.step('echo "$PWD $X"; ls /testbed/*.txt')
                assert o["output"] == "/testbed/calc 1\n/testbed/after.txt\n/testbed/before.txt\n" and not done
            kids[0].step("echo c > /testbed/child.txt")
            assert env.step("test -e /testbed/child.txt")[0]["exit_code"] == 1  # isolated
        finally:
            for k in kids:
                k.close()
        obs = env.rollback(mark)
        assert obs["sandbox_id"] == env.episode.sandbox_id and env.steps == 2
        o = env.step('echo "$PWD $X"; ls /testbed/*.txt')[0]
        assert o["output"] == "/testbed/calc 1\n/testbed/before.txt\n"
        env.rollback()
        assert env.steps == 0
        assert env.step("pwd; ls /testbed/*.txt")[0]["output"].startswith("/testbed\n")
    # The environment deleted the snapshot it took when its episode ended.
    assert mark not in [s.name for s in client.snapshots()]


def test_rllm_snapshot_triad(client):
    ref = build_snapshot(IID, "rllm-env-test", setup=["echo baked > /testbed/baked.txt"], client=client)
    assert ref == "snapshot:rllm-env-test" and not snapshot_absent(ref, client=client)
    assert build_snapshot(IID, "rllm-env-test", ref, client=client) == ref  # reused, not rebuilt
    try:
        sb = create_sandbox(ref, client=client)
        try:
            assert sb.exec("cat /testbed/baked.txt") == "baked\n" and sb.is_alive()
        finally:
            sb.close()
        pool = WarmPool(ref, 1, client=client)
        try:
            warm = pool.get(timeout=120)
            assert warm.exec("cat /testbed/baked.txt") == "baked\n"
            warm.close()
        finally:
            pool.close()
        # force rebuilds under the same key
        ref2 = build_snapshot(IID, "rllm-env-test", ref, force=True, setup=["echo again > /testbed/baked.txt"],
                              client=client)
        sb = create_sandbox(ref2, client=client)
        try:
            assert sb.exec("cat /testbed/baked.txt") == "again\n"
        finally:
            sb.close()
    finally:
        assert delete_snapshot(ref, client=client) is True
    assert snapshot_absent(ref, client=client)
    assert delete_snapshot(ref, client=client) is True  # gone already
    with pytest.raises(SnapshotNotFound):
        create_sandbox(ref, client=client)
    with pytest.raises(msb.rllm.SandboxCommandError):
        build_snapshot(IID, "rllm-env-bad", setup=["exit 3"], client=client)
    assert snapshot_absent("snapshot:rllm-env-bad", client=client)
    assert client.list_sandboxes({"harness": "rllm"}) == []
