"""A SWE-ReX deployment on msb: ``msb.swerex.MsbDeployment``.

SWE-agent (and anything else written against SWE-ReX) drives a sandbox
through a deployment (``start``, ``stop``, ``is_alive``, ``runtime``) and the
``RemoteRuntime`` it hands out. ``MsbDeployment.start`` creates an msb task
sandbox and returns SWE-ReX's own ``RemoteRuntime`` pointed at the daemon's
SWE-ReX-compatible routes for that sandbox (``/swerex/<id>``), so sessions,
``run_in_session``, ``execute``, files and uploads go through SWE-ReX's
real client code unchanged; ``stop`` closes the runtime and the sandbox.

``RemoteRuntime`` speaks TCP only, so the daemon must listen on TCP with a
token (``msb serve --listen 127.0.0.1:7777 --token-file F``); the sandbox
is created over ``address`` (any transport, default the same URL).

Requires the ``swerex`` extra (``pip install 'msb[swerex]'``).

>>> from msb.swerex import MsbDeployment
>>> dep = MsbDeployment(instance_id="demo__calc-1", swerex_url="http://127.0.0.1:7777", token="...")
>>> await dep.start(); rt = dep.runtime    # a swerex.runtime.remote.RemoteRuntime
"""

from __future__ import annotations

import logging
import os
from typing import Any, Dict, Literal, Optional

from pydantic import BaseModel, ConfigDict
from swerex.deployment.abstract import AbstractDeployment
from swerex.deployment.hooks.abstract import CombinedDeploymentHook, DeploymentHook
from swerex.exceptions import DeploymentNotStartedError
from swerex.runtime.abstract import IsAliveResponse
from swerex.runtime.remote import RemoteRuntime

from . import aio
from . import types as t
from ._transport import Address, default_address, default_token


class MsbDeploymentConfig(BaseModel):
    """Configuration of an MsbDeployment (the keyword arguments)."""

    #: an instance the daemon knows, or ``instance``, a dataset row
    instance_id: str = ""
    instance: Optional[Dict[str, Any]] = None
    #: a raw sandbox on the host's system directories when no instance is given
    host_base: bool = False
    #: the daemon's TCP URL for SWE-ReX's client (default: MSB_SOCKET when it is http://)
    swerex_url: str = ""
    #: where to create the sandbox (default: swerex_url)
    address: str = ""
    #: the daemon's token (default: MSB_TOKEN, MSB_TOKEN_FILE)
    token: str = ""
    labels: Dict[str, str] = {}
    memory_bytes: int = 0
    admission_wait: float = 600.0
    #: seconds to wait for the runtime to answer is_alive after start
    startup_timeout: float = 60.0
    #: RemoteRuntime's request timeout for is_alive (SWE-ReX's default 0.15 s)
    runtime_timeout: float = 0.15

    type: Literal["msb"] = "msb"
    model_config = ConfigDict(extra="forbid")

    def get_deployment(self) -> "MsbDeployment":
        """The deployment (as SWE-ReX's configs do)."""
        return MsbDeployment.from_config(self)


class MsbDeployment(AbstractDeployment):
    """SWE-ReX deployment whose runtime is an msb sandbox."""

    def __init__(self, *, logger: Optional[logging.Logger] = None, **kwargs: Any) -> None:
        self._config = MsbDeploymentConfig(**kwargs)
        self.logger = logger or logging.getLogger("msb.swerex")
        self._hooks = CombinedDeploymentHook()
        self._runtime: Optional[RemoteRuntime] = None
        self._client: Optional[aio.Client] = None
        self.sandbox: Optional[aio.Sandbox] = None

    @classmethod
    def from_config(cls, config: MsbDeploymentConfig) -> "MsbDeployment":
        """A deployment from its config."""
        return cls(**config.model_dump(exclude={"type"}))

    def add_hook(self, hook: DeploymentHook) -> None:
        """Add a hook told of start-up steps."""
        self._hooks.add_hook(hook)

    def _urls(self) -> tuple:
        c = self._config
        swerex_url = c.swerex_url
        if not swerex_url:
            env = os.environ.get("MSB_SOCKET", "")
            if not env.startswith("http"):
                raise ValueError("MsbDeployment needs swerex_url (the daemon's http(s)://HOST:PORT): "
                                 "SWE-ReX's RemoteRuntime speaks TCP only")
            swerex_url = env
        addr = Address.parse(c.address) if c.address else (Address.parse(swerex_url) if swerex_url else default_address())
        return swerex_url.rstrip("/"), addr

    async def start(self) -> None:
        """Create the sandbox and wait until its SWE-ReX routes answer."""
        c = self._config
        swerex_url, addr = self._urls()
        token = c.token or default_token()
        self._hooks.on_custom_step("Creating msb sandbox")
        self._client = aio.Client(addr, token=token)
        self.sandbox = await self._client.create_sandbox(
            c.instance_id, instance=c.instance, host_base=c.host_base and not (c.instance_id or c.instance),
            labels={"harness": "swe-rex", **c.labels}, limits=t.Limits(memory_bytes=c.memory_bytes),
            admission_wait=c.admission_wait)
        self.logger.info("msb sandbox %s for %s", self.sandbox.id, c.instance_id or "host")
        self._runtime = RemoteRuntime(host=f"{swerex_url}/swerex/{self.sandbox.id}", auth_token=token,
                                      timeout=c.runtime_timeout, logger=self.logger)
        self._hooks.on_custom_step("Waiting for the msb sandbox's runtime")
        await self._runtime.wait_until_alive(timeout=c.startup_timeout)

    async def stop(self) -> None:
        """Close the runtime's sessions, then the sandbox."""
        if self._runtime is not None:
            try:
                await self._runtime.close()
            finally:
                self._runtime = None
        if self.sandbox is not None:
            await self.sandbox.close()
            self.sandbox = None
        if self._client is not None:
            await self._client.close()
            self._client = None

    async def is_alive(self, *, timeout: Optional[float] = None) -> IsAliveResponse:
        """Whether the sandbox's runtime answers."""
        return await self.runtime.is_alive(timeout=timeout)

    @property
    def runtime(self) -> RemoteRuntime:
        """SWE-ReX's RemoteRuntime on the sandbox; DeploymentNotStartedError before start."""
        if self._runtime is None:
            raise DeploymentNotStartedError()
        return self._runtime

    async def evaluate(self, patch: Optional[str] = None, *, model: str = "") -> t.EvalResult:
        """Grade ``patch`` (default: the sandbox's diff) in a fresh sandbox."""
        if self.sandbox is None:
            raise DeploymentNotStartedError()
        return (await self.sandbox.evaluate(patch, model=model)).result
