"""The asyncio transport and answers that have no body."""

from __future__ import annotations

import asyncio

import msb.aio

IID = "demo__calc-1"


async def test_async_answers_without_a_body(daemon):
    """A 204 (closing a session, deleting a snapshot) comes without
    Content-Length on a kept-alive connection: the client must not wait for
    a body until the connection closes."""
    async with msb.aio.Client(daemon.address) as c:
        async with await c.create_sandbox(IID) as sb:
            s = await sb.session("nobody")
            await asyncio.wait_for(s.close(), 30)
            assert await asyncio.wait_for(sb.sessions(), 30) == []
