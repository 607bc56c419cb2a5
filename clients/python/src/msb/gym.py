"""A gym-style environment for custom trainers: ``msb.gym.MsbEnv``.

``reset(instance_id)`` starts an episode (a task sandbox at the task's
starting state with a persistent shell in /testbed) and returns the
observation; ``step(command)`` runs one bash command and returns
``(observation, reward, done, info)``. The reward is 0 until the episode
ends; then it is msb's grade of the agent's diff in a FRESH sandbox
(SWE-bench's rules: 1.0 resolved, else 0.0, or the fraction of tests that
pass with the daemon's ``--reward fraction``). An episode ends when a
command's first output line is ``COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT``
and it exits 0, when the shell exits, or after ``max_steps``.

It uses the daemon's gym routes (``/v1/gym``): one round trip per step.

Branching an episode: ``snapshot()`` keeps its state (files, and the shell's
cwd and environment) under a name, ``rollback(name)`` returns to it (no
name: to the episode's start), and ``fork(n)`` gives n environments that
continue the episode from its state now, each in a sandbox of its own (for
GRPO groups and tree search). Running processes are not carried; the
snapshots an environment took are deleted when its episode ends.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any, Dict, List, Optional, Tuple

from . import types as t
from .client import Client
from .errors import NotFound


class MsbEnv:
    """One episode at a time on an msb daemon."""

    def __init__(self, client: Optional[Client] = None, *, max_steps: int = 100, step_timeout: float = 60.0,
                 model: str = "gym", labels: Optional[Dict[str, str]] = None, admission_wait: float = 600.0) -> None:
        self.client = client or Client()
        self.max_steps = max_steps
        self.step_timeout = step_timeout
        self.model = model
        self.labels = labels or {}
        self.admission_wait = admission_wait
        self.episode: Optional[t.GymObservation] = None
        self.steps = 0
        self.last: Optional[t.GymSubmitResult] = None
        #: the step count at each snapshot this environment knows, by name
        self._marks: Dict[str, int] = {}
        self._taken: List[str] = []  # the snapshots it took, deleted at the episode's end
        self._seq = itertools.count(1)

    def reset(self, instance_id: str = "", *, instance: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        """Start an episode (closing the previous one); the observation:
        ``problem_statement``, ``cwd``, ``instance_id``, ``sandbox_id``."""
        self.close()
        self.episode = self.client.gym_reset(instance_id, instance=instance, labels={"harness": "gym", **self.labels},
                                             admission_wait=self.admission_wait)
        self.steps = 0
        self.last = None
        return self._observation()

    def step(self, command: str) -> Tuple[Dict[str, Any], float, bool, Dict[str, Any]]:
        """Run one command; ``(observation, reward, done, info)``. The
        observation holds ``output`` and ``exit_code``; once done, info holds
        the evaluation (``outcome``, ``result``)."""
        if self.episode is None:
            raise RuntimeError("step before reset")
        self.steps += 1
        st = self.client.gym_step(self.episode.sandbox_id, command, timeout=self.step_timeout)
        obs = {"output": st.observation.stdout, "exit_code": st.observation.exit_code,
               "timed_out": st.observation.timed_out}
        info: Dict[str, Any] = {"steps": self.steps}
        if not (st.done or self.steps >= self.max_steps):
            return obs, 0.0, False, info
        self.last = self.client.gym_submit(self.episode.sandbox_id, model=self.model)
        self.episode = None
        self._drop_snapshots()
        info.update(outcome=self.last.outcome, result=self.last.result, truncated=not st.done,
                    flaky=self.last.result.flaky)
        return obs, float(self.last.reward), True, info

    def snapshot(self, name: str = "") -> str:
        """Keep the episode's state now under ``name`` (default: one made
        from the sandbox id) and return the name, for ``rollback`` and
        ``fork``. The sandbox is frozen while its writes are copied."""
        ep = self._running("snapshot")
        name = name or f"gym-{ep.sandbox_id}-{next(self._seq)}"
        self.client.snapshot(ep.sandbox_id, name)
        self._marks[name] = self.steps
        self._taken.append(name)
        return name

    def rollback(self, snapshot: str = "") -> Dict[str, Any]:
        """Undo steps: the episode's sandbox returns in place to ``snapshot``
        (default: the episode's start) and its shell restarts in the cwd and
        environment it had; the step count returns with it. The observation
        is reset's."""
        ep = self._running("rollback")
        self.client.rollback(ep.sandbox_id, snapshot)
        self.steps = self._marks.get(snapshot, 0) if snapshot else 0
        return self._observation()

    def fork(self, n: int = 1, *, snapshot: str = "") -> List["MsbEnv"]:
        """``n`` environments that continue this episode from its state now
        (or from ``snapshot``), each in a sandbox of its own, with this
        one's settings and step count; this episode goes on unchanged.
        Close (or finish) each of them."""
        ep = self._running("fork")
        kids = self.client.fork(ep.sandbox_id, n, snapshot=snapshot)
        out = []
        for kid in kids:
            env = MsbEnv(self.client, max_steps=self.max_steps, step_timeout=self.step_timeout, model=self.model,
                         labels=self.labels, admission_wait=self.admission_wait)
            env.episode = dataclasses.replace(ep, sandbox_id=kid.id)
            env.steps = self._marks.get(snapshot, self.steps) if snapshot else self.steps
            env._marks = dict(self._marks)
            out.append(env)
        return out

    def close(self) -> None:
        """End the running episode without grading it."""
        if self.episode is not None:
            self.client.close_sandbox(self.episode.sandbox_id)
            self.episode = None
        self._drop_snapshots()

    def _running(self, what: str) -> t.GymObservation:
        if self.episode is None:
            raise RuntimeError(f"{what} without a running episode (reset first)")
        return self.episode

    def _observation(self) -> Dict[str, Any]:
        ep = self._running("observe")
        return {"instance_id": ep.instance_id, "problem_statement": ep.problem_statement, "cwd": ep.cwd,
                "sandbox_id": ep.sandbox_id}

    def _drop_snapshots(self) -> None:
        for name in self._taken:
            try:
                self.client.delete_snapshot(name)
            except NotFound:
                pass
        self._taken.clear()
        self._marks.clear()

    def __enter__(self) -> "MsbEnv":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
