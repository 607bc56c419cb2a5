"""Drive msb's E2B front end with the e2b SDK's asyncio form: concurrent
commands in one sandbox keep their outputs apart, and output is streamed
as it is printed. Prints one JSON object, which e2b_test.go checks."""
import asyncio
import json

from e2b import AsyncSandbox, CommandExitException, PtySize


async def main():
    sb = await AsyncSandbox.create()
    results = await asyncio.gather(*[sb.commands.run(f"echo {i}") for i in range(20)])
    chunks = []
    await sb.commands.run("for i in 1 2 3; do echo $i; sleep 0.1; done", on_stdout=chunks.append)
    h = await sb.commands.run("cat", background=True, stdin=True)
    await sb.commands.send_stdin(h.pid, "async in\n")
    await sb.commands.close_stdin(h.pid)
    again = await sb.commands.connect(h.pid)
    stdin = [(await h.wait()).stdout, (await again.wait()).exit_code]
    tty = bytearray()
    p = await sb.pty.create(PtySize(rows=24, cols=80), on_data=tty.extend)
    await sb.pty.resize(p.pid, PtySize(rows=30, cols=90))
    await sb.pty.send_stdin(p.pid, b"echo size=$(stty size); exit 5\n")
    try:
        pty = [(await p.wait()).exit_code]
    except CommandExitException as e:
        pty = [e.exit_code]
    pty.append("size=30 90" in tty.decode())
    await sb.files.write("/root/f.txt", "forked")
    kids = await sb.fork(count=2)
    forked = [await k.files.read("/root/f.txt") for k in kids]
    for k in kids:
        await k.kill()
    await sb.pause()
    again = await AsyncSandbox.connect(sb.sandbox_id)
    resumed = (await again.commands.run("cat /root/f.txt")).stdout
    await sb.kill()
    print(json.dumps({"outputs": [r.stdout for r in results], "chunks": chunks, "stdin": stdin,
                      "pty": pty, "forked": forked, "resumed": resumed}))


asyncio.run(main())
