"""Harbor's own environment interface on msb: ``msb.harbor_env:MsbEnvironment``.

A subclass of Harbor's ``BaseEnvironment`` (Harbor ≥ 0.26, Python ≥ 3.12),
loaded by Harbor from its import path (``import_path:
"msb.harbor_env:MsbEnvironment"`` in a trial's environment config, or
``EnvironmentFactory.create_environment_from_import_path``). Its extra
keyword arguments are ``instance_id`` (or ``instance``, a dataset row),
``address`` and ``token`` of the daemon; each method is the Harbor-style
``msb.harbor.MsbHarborEnvironment``'s, with Harbor's ``ExecResult``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Optional

from harbor.environments.base import BaseEnvironment
from harbor.environments.base import ExecResult as HarborExecResult

from . import aio
from .harbor import MsbHarborEnvironment


class MsbEnvironment(BaseEnvironment):
    """A Harbor environment whose container is an msb task sandbox."""

    def __init__(self, *args: Any, instance_id: str = "", instance: Optional[Dict[str, Any]] = None,
                 address: str = "", token: str = "", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        mem = self._effective_memory_mb or 0  # the task's memory, MB
        self._msb = MsbHarborEnvironment(instance_id, instance=instance,
                                         client=aio.Client(address or None, token=token or None),
                                         labels={"harbor_session": self.session_id}, memory_mb=mem)

    @staticmethod
    def type() -> str:
        """Harbor's name for this environment type."""
        return "msb"

    def _validate_definition(self) -> None:
        """Nothing to check: the environment is the instance's msb layers,
        not a Dockerfile in environment_dir."""

    @property
    def sandbox_id(self) -> str:
        """The msb sandbox, once started."""
        return self._msb.sandbox.id if self._msb.sandbox else ""

    async def start(self, force_build: bool) -> None:
        await self._msb.start(force_build)

    async def stop(self, delete: bool) -> None:
        await self._msb.stop(delete)
        await self._msb.client.close()

    async def exec(self, command: str, cwd: Optional[str] = None, env: Optional[Dict[str, str]] = None,
                   timeout_sec: Optional[int] = None, user: Any = None) -> HarborExecResult:
        r = await self._msb.exec(command, cwd=cwd, env=self._merge_env(env), timeout_sec=timeout_sec,
                                 user=self._resolve_user(user))
        return HarborExecResult(stdout=r.stdout, stderr=r.stderr, return_code=r.return_code)

    async def upload_file(self, source_path: "Path | str", target_path: str) -> None:
        await self._msb.upload_file(source_path, target_path)

    async def upload_dir(self, source_dir: "Path | str", target_dir: str) -> None:
        await self._msb.upload_dir(source_dir, target_dir)

    async def download_file(self, source_path: str, target_path: "Path | str") -> None:
        await self._msb.download_file(source_path, target_path)

    async def download_dir(self, source_dir: str, target_dir: "Path | str") -> None:
        await self._msb.download_dir(source_dir, target_dir)

    async def verify(self, patch: Optional[str] = None) -> Any:
        """msb's grade of the agent's diff in a fresh sandbox, written to
        /logs/verifier/reward.txt as Harbor's verifier would."""
        return await self._msb.verify(patch)
