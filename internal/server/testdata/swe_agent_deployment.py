"""SWE-agent's remote deployment against msb serve --swerex.

Usage: python swe_agent_deployment.py HOST PORT TOKEN WORKDIR

SWE-agent's `--env.deployment.type remote` is SWE-ReX's RemoteDeployment;
this runs the calls SWE-agent's SWEEnv makes through it (start, wait until
alive with SWE-agent's 0.15 s is_alive timeout, a session sourcing
/root/.bashrc, the tool bundle uploaded to /root/tools, env variables,
commands with check="silent" and a 25 s timeout, a timeout followed by the
interrupt SWE-agent sends, the diff, stop). SWE-agent itself does not
install from PyPI (its package there is a placeholder that cannot be
installed), so its own calls are reproduced here.
"""

import asyncio
import os
import sys
import tempfile

from swerex.deployment.remote import RemoteDeployment
from swerex.exceptions import CommandTimeoutError
from swerex.runtime.abstract import BashAction, BashInterruptAction, Command, CreateBashSessionRequest, UploadRequest, WriteFileRequest


async def main(host, port, token, workdir):
    dep = RemoteDeployment(host=host, port=int(port), auth_token=token, timeout=0.15)
    await dep.start()
    for _ in range(100):
        if await dep.is_alive():
            break
        await asyncio.sleep(0.1)
    else:
        raise AssertionError("never alive")
    rt = dep.runtime
    await rt.write_file(WriteFileRequest(path="/root/.bashrc", content="export FROM_BASHRC=1\n"))
    await rt.create_session(CreateBashSessionRequest(startup_source=["/root/.bashrc"], startup_timeout=10))

    async def communicate(cmd, timeout=25):
        obs = await rt.run_in_session(BashAction(command=cmd, timeout=timeout, check="silent"))
        return obs.output, obs.exit_code

    bundle = tempfile.mkdtemp(dir=workdir)
    os.makedirs(os.path.join(bundle, "bin"))
    with open(os.path.join(bundle, "bin", "hello_tool"), "w") as f:
        f.write("#!/bin/bash\necho tool says $1\n")
    await rt.upload(UploadRequest(source_path=bundle, target_path="/root/tools/demo"))
    out, code = await communicate("chmod +x /root/tools/demo/bin/*; export PATH=$PATH:/root/tools/demo/bin; export PAGER=cat")
    assert code == 0, (out, code)
    out, code = await communicate("hello_tool hi && echo $FROM_BASHRC && pwd")
    assert out.split() == ["tool", "says", "hi", "1", "/testbed"], out
    out, code = await communicate("cd /testbed && printf 'x = 1\\n' > added.py && git status --porcelain")
    assert "added.py" in out and code == 0, out
    try:
        await communicate("sleep 100", timeout=0.5)
        raise AssertionError("no timeout")
    except CommandTimeoutError:
        await rt.run_in_session(BashInterruptAction())
    out, code = await communicate("echo after interrupt")
    assert out.strip() == "after interrupt", out
    r = await rt.execute(Command(command="cd /testbed && git add -A && git diff --cached", shell=True))
    assert "added.py" in r.stdout, r
    await dep.stop()
    print("ok swe-agent deployment")


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
