"""Drives msb serve's SWE-ReX-compatible routes through SWE-ReX's own client.

Usage: python swerex_client.py URL TOKEN WORKDIR

URL is a sandbox's SWE-ReX base (http://127.0.0.1:PORT/swerex/<id>, or the
root of msb serve --swerex). Every route goes through
swerex.runtime.remote.RemoteRuntime from PyPI, unchanged. Prints "ok N"
after N checks; any failed check raises.
"""

import asyncio
import os
import sys
import tempfile
import time

from swerex.exceptions import (
    BashIncorrectSyntaxError,
    CommandTimeoutError,
    NonZeroExitCodeError,
    SessionDoesNotExistError,
    SessionExistsError,
)
from swerex.runtime.abstract import (
    BashAction,
    BashInterruptAction,
    CloseBashSessionRequest,
    Command,
    CreateBashSessionRequest,
    ReadFileRequest,
    UploadRequest,
    WriteFileRequest,
)
from swerex.runtime.remote import RemoteRuntime

checks = 0


def check(cond, what):
    global checks
    if not cond:
        raise AssertionError(what)
    checks += 1


async def raises(exc, coro, what):
    try:
        await coro
    except exc as e:
        check(True, what)
        return e
    raise AssertionError(f"{what}: {exc.__name__} not raised")


async def main(url, token, workdir):
    rt = RemoteRuntime(host=url, auth_token=token, timeout=10)
    check((await rt.is_alive()).is_alive, "is_alive")

    # Auth: a wrong token is refused.
    bad = RemoteRuntime(host=url, auth_token="wrong", timeout=10)
    alive = await bad.is_alive()
    check(not alive.is_alive and "401" in alive.message, f"wrong token is_alive: {alive}")
    try:
        await bad.execute(Command(command="true", shell=True))
        raise AssertionError("wrong token executed a command")
    except AssertionError:
        raise
    except Exception as e:  # aiohttp.ClientResponseError 401
        check("401" in str(e), f"wrong token: {e}")

    # Sessions, as SWE-agent opens them.
    out = await rt.create_session(CreateBashSessionRequest(startup_source=["/nonexistent/.bashrc"], startup_timeout=10))
    check("No such file" in out.output, f"startup_source output: {out.output!r}")
    await raises(SessionExistsError, rt.create_session(CreateBashSessionRequest()), "session exists")
    obs = await rt.run_in_session(BashAction(command="cd /tmp && export X=41 && echo $((X+1))", check="silent", timeout=25))
    check(obs.output.strip() == "42" and obs.exit_code == 0 and obs.expect_string == "SHELLPS1PREFIX", f"run: {obs}")
    obs = await rt.run_in_session(BashAction(command="echo $PWD $X\nfalse", check="silent"))
    check(obs.output.strip() == "/tmp 41" and obs.exit_code == 1, f"state and exit code: {obs}")
    obs = await rt.run_in_session(BashAction(command="exit_code_ignored() { return 3; }; exit_code_ignored", check="ignore"))
    check(obs.exit_code is None, f"check ignore: {obs}")
    e = await raises(NonZeroExitCodeError, rt.run_in_session(BashAction(command="ls /nope", check="raise", error_msg="listing")), "check raise")
    check(str(e).startswith("listing: Command 'ls /nope' failed with exit code 2"), f"raise message: {e}")
    e = await raises(BashIncorrectSyntaxError, rt.run_in_session(BashAction(command="echo (", check="silent")), "bash -n")
    check("syntax error" in e.extra_info["bash_stderr"] and "bash_stdout" in e.extra_info, f"syntax extra_info: {e.extra_info}")
    obs = await rt.run_in_session(BashAction(command="echo hello world", expect=["wor"], check="silent"))
    check(obs.expect_string == "wor" and obs.output == "hello ", f"expect: {obs}")

    # A timeout leaves the command running until the interrupt.
    marker = f"/tmp/msb-still-running-{os.getpid()}"
    await raises(CommandTimeoutError,
                 rt.run_in_session(BashAction(command=f"echo started; sleep 0.6; touch {marker}; sleep 60", timeout=0.2, check="silent")),
                 "timeout")
    time.sleep(1.2)
    exists = await rt.execute(Command(command=["test", "-e", marker]))
    check(exists.exit_code == 0, "the timed-out command kept running")
    obs = await rt.run_in_session(BashInterruptAction())
    check(obs.exit_code == 0 and "started" in obs.output, f"interrupt returns the command's output: {obs}")
    obs = await rt.run_in_session(BashAction(command="echo $X", check="silent", timeout=5))
    check(obs.output.strip() == "41", f"session usable after the interrupt: {obs}")
    obs = await rt.run_in_session(BashInterruptAction())
    check(obs.output == "" and obs.exit_code == 0, f"interrupt of an idle session: {obs}")

    # Interactive commands, as SWE-agent drives a REPL: start python3 up to
    # its prompt, send it lines, interrupt it, quit it; the shell's state
    # survives.
    obs = await rt.run_in_session(BashAction(command="python3", is_interactive_command=True, expect=[">>> "], timeout=20))
    check(obs.expect_string == ">>> " and obs.exit_code == 0 and obs.output.startswith("Python 3"), f"python3 started: {obs}")
    obs = await rt.run_in_session(BashAction(command="print(6*7)", is_interactive_command=True, expect=[">>> "], timeout=10))
    check(obs.output == "42" and obs.expect_string == ">>> " and obs.exit_code == 0, f"print(6*7): {obs}")
    obs = await rt.run_in_session(BashAction(command="print('SHELLPS1PREFIX')", is_interactive_command=True, expect=[">>> "], timeout=10))
    check(obs.output == "SHELLPS1PREFIX" and obs.expect_string == ">>> ", f"a printed prompt is output: {obs}")
    sleeping = f"/tmp/msb-python-sleeps-{os.getpid()}"
    e = await raises(CommandTimeoutError,
                     rt.run_in_session(BashAction(command=f"import time; open({sleeping!r}, 'w').close(); time.sleep(60)", is_interactive_command=True, expect=[">>> "], timeout=0.3)),
                     "interactive timeout")
    check("timeout after 0.3 seconds while running command" in str(e), f"interactive timeout message: {e}")
    for _ in range(600):  # the interrupt is for the sleep, not for the prompt before it
        if (await rt.execute(Command(command=["test", "-e", sleeping]))).exit_code == 0:
            break
        time.sleep(0.05)
    obs = await rt.run_in_session(BashInterruptAction(expect=[">>> "]))
    check("KeyboardInterrupt" in obs.output and obs.expect_string == ">>> ", f"interrupt of python3: {obs}")
    obs = await rt.run_in_session(BashAction(command="print('still', 'here')", is_interactive_command=True, expect=[">>> "], timeout=10))
    check(obs.output == "still here", f"python3 survived the interrupt: {obs}")
    await raises(Exception, rt.run_in_session(BashAction(command="echo $X", check="silent", timeout=5)), "normal command while python3 runs")
    obs = await rt.run_in_session(BashAction(command="exit()", is_interactive_quit=True, timeout=10))
    check(obs.expect_string == "SHELLPS1PREFIX" and obs.exit_code == 0, f"quit: {obs}")
    obs = await rt.run_in_session(BashAction(command="echo $PWD $X", check="silent", timeout=5))
    check(obs.output.strip() == "/tmp 41" and obs.exit_code == 0, f"state after the interactive command: {obs}")
    # An interrupt with no expect ends the program; the shell comes back.
    await rt.run_in_session(BashAction(command="python3", is_interactive_command=True, expect=[">>> "], timeout=20))
    obs = await rt.run_in_session(BashInterruptAction())
    check(obs.expect_string == "SHELLPS1PREFIX", f"interrupt without expect: {obs}")
    obs = await rt.run_in_session(BashAction(command="echo back", check="silent", timeout=5))
    check(obs.output.strip() == "back", f"shell after the killed REPL: {obs}")

    # execute: shell, argv, env (replaces), cwd, merged streams, timeout, check.
    r = await rt.execute(Command(command="echo out; echo err >&2; exit 3", shell=True))
    check((r.stdout, r.stderr, r.exit_code) == ("out\n", "err\n", 3), f"execute: {r}")
    r = await rt.execute(Command(command="echo out; echo err >&2", shell=True, merge_output_streams=True))
    check(r.stdout == "out\nerr\n" and r.stderr == "", f"merged: {r}")
    r = await rt.execute(Command(command=["printf", "%s|", "a b", "c"], cwd="/usr"))
    check(r.stdout == "a b|c|", f"argv: {r}")
    r = await rt.execute(Command(command="pwd; echo ${ONLY-unset} ${HOME-nohome}", shell=True, env={"ONLY": "1"}, cwd="/usr"))
    check(r.stdout == "/usr\n1 nohome\n", f"env replaces: {r}")
    r = await rt.execute(Command(command="cat; echo eof", shell=True))
    check(r.stdout == "eof\n", f"stdin is /dev/null: {r}")
    await raises(CommandTimeoutError, rt.execute(Command(command="sleep 30", shell=True, timeout=0.3)), "execute timeout")
    await raises(NonZeroExitCodeError, rt.execute(Command(command="false", shell=True, check=True)), "execute check")
    await raises(FileNotFoundError, rt.execute(Command(command="ls -la")), "no such program")
    await raises(FileNotFoundError, rt.execute(Command(command=["ls"], cwd="/nope")), "no such cwd")

    # Files.
    await rt.write_file(WriteFileRequest(content="héllo\nwörld\r\n", path="/tmp/rex/deep/f.txt"))
    got = await rt.read_file(ReadFileRequest(path="/tmp/rex/deep/f.txt"))
    check(got.content == "héllo\nwörld\n", f"read back (universal newlines): {got.content!r}")
    await raises(FileNotFoundError, rt.read_file(ReadFileRequest(path="/tmp/rex/none")), "read missing")
    await raises(IsADirectoryError, rt.read_file(ReadFileRequest(path="/tmp/rex")), "read a directory")

    # Upload a file, and a directory (zipped by the client, unzipped here).
    local = tempfile.mkdtemp(dir=workdir)
    with open(os.path.join(local, "one.py"), "w") as f:
        f.write("print('one')\n")
    os.makedirs(os.path.join(local, "tools", "bin"))
    with open(os.path.join(local, "tools", "bin", "run"), "w") as f:
        f.write("#!/bin/sh\necho tool\n")
    with open(os.path.join(local, "tools", "README"), "w") as f:
        f.write("tools\n")
    await rt.upload(UploadRequest(source_path=os.path.join(local, "one.py"), target_path="/root/up/one.py"))
    await rt.upload(UploadRequest(source_path=os.path.join(local, "tools"), target_path="/root/tools/bundle"))
    r = await rt.execute(Command(command="cat /root/up/one.py; find /root/tools -type f | sort; sh /root/tools/bundle/bin/run", shell=True))
    check(r.stdout == "print('one')\n/root/tools/bundle/README\n/root/tools/bundle/bin/run\ntool\n", f"uploads: {r}")

    await rt.close_session(CloseBashSessionRequest())
    await raises(SessionDoesNotExistError, rt.run_in_session(BashAction(command="true")), "closed session")
    await raises(SessionDoesNotExistError, rt.close_session(CloseBashSessionRequest()), "close twice")
    await rt.create_session(CreateBashSessionRequest(session="second"))
    await rt.close()
    await raises(SessionDoesNotExistError, rt.run_in_session(BashAction(command="true", session="second")), "close closes sessions")
    check((await rt.is_alive()).is_alive, "alive after close")
    print("ok", checks)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3]))
