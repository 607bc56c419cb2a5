"""A Harbor-style environment on msb: ``msb.harbor.MsbHarborEnvironment``.

Harbor (and SkyRL's recommended path through it) drives an environment
with ``start(force_build)``, ``stop(delete)``, ``exec(command, cwd=None,
env=None, timeout_sec=None, user=None)`` returning ``stdout``, ``stderr``
and ``return_code``, and uploads and downloads of files and directories;
its verifier writes ``/logs/verifier/reward.txt``. This class has those
methods (asyncio, as Harbor's are) over an msb task sandbox, and
``verify()`` grades the agent's diff in a fresh sandbox and writes the
reward where Harbor's verifier would.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Dict, Optional

from . import aio
from . import types as t


@dataclass
class ExecResult:
    """What Harbor's exec returns."""

    stdout: Optional[str]
    stderr: Optional[str]
    return_code: int


REWARD_FILE = "/logs/verifier/reward.txt"


class MsbHarborEnvironment:
    """One task sandbox, driven the way Harbor drives its environments."""

    def __init__(self, instance_id: str = "", *, instance: Optional[Dict[str, Any]] = None,
                 client: Optional[aio.Client] = None, labels: Optional[Dict[str, str]] = None,
                 memory_mb: int = 0, admission_wait: float = 600.0) -> None:
        self.instance_id = instance_id
        self.instance = instance
        self.client = client or aio.Client()
        self.labels = {"harness": "harbor", **(labels or {})}
        self.memory_mb = memory_mb
        self.admission_wait = admission_wait
        self.sandbox: Optional[aio.Sandbox] = None

    @staticmethod
    def type() -> str:
        """The environment type's name."""
        return "msb"

    async def start(self, force_build: bool = False) -> None:
        """Create the sandbox (an environment missing from the daemon's
        cache is built once, whatever force_build says: layers are
        immutable, so a rebuild could only make the same one)."""
        self.sandbox = await self.client.create_sandbox(
            self.instance_id, instance=self.instance, host_base=not (self.instance_id or self.instance),
            labels=self.labels, limits=t.Limits(memory_bytes=self.memory_mb << 20), admission_wait=self.admission_wait)

    async def stop(self, delete: bool = True) -> None:
        """Close the sandbox (it is always deleted: nothing of it is kept)."""
        if self.sandbox is not None:
            await self.sandbox.close()
            self.sandbox = None

    def _sb(self) -> aio.Sandbox:
        if self.sandbox is None:
            raise RuntimeError("environment not started")
        return self.sandbox

    async def exec(self, command: str, cwd: Optional[str] = None, env: Optional[Dict[str, str]] = None,
                   timeout_sec: Optional[float] = None, user: Optional[str] = None) -> ExecResult:
        """Run command in a fresh bash; stdout and stderr apart."""
        if user not in (None, "", "root", 0):
            command = f"runuser -u {user} -- bash -c '" + command.replace("'", "'\\''") + "'"
        res = await self._sb().exec(command, cwd=cwd or "", env=env, timeout=timeout_sec, separate_stderr=True)
        code = 124 if res.timed_out else res.exit_code  # timeout(1)'s code, as a shell would see it
        return ExecResult(stdout=res.stdout, stderr=res.stderr, return_code=code)

    async def upload_file(self, source_path: "os.PathLike[str] | str", target_path: str) -> None:
        """Copy a local file into the sandbox."""
        await self._sb().upload(os.fspath(source_path), target_path)

    async def upload_dir(self, source_dir: "os.PathLike[str] | str", target_dir: str) -> None:
        """Copy a local directory's contents into target_dir."""
        await self._sb().upload(os.fspath(source_dir), target_dir)

    async def download_file(self, source_path: str, target_path: "os.PathLike[str] | str") -> None:
        """Copy a file out of the sandbox."""
        await self._sb().download(source_path, os.fspath(target_path))

    async def download_dir(self, source_dir: str, target_dir: "os.PathLike[str] | str") -> None:
        """Copy a directory's contents out of the sandbox."""
        await self._sb().download(source_dir, os.fspath(target_dir))

    async def verify(self, patch: Optional[str] = None) -> t.EvalResult:
        """Grade the agent's diff (or patch) in a fresh sandbox; the reward
        goes to /logs/verifier/reward.txt in this sandbox, as Harbor reads it."""
        res = (await self._sb().evaluate(patch, model="harbor")).result
        await self._sb().write_file(REWARD_FILE, f"{res.reward:g}\n")
        return res
