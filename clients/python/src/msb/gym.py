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
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

from . import types as t
from .client import Client


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

    def reset(self, instance_id: str = "", *, instance: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        """Start an episode (closing the previous one); the observation:
        ``problem_statement``, ``cwd``, ``instance_id``, ``sandbox_id``."""
        self.close()
        self.episode = self.client.gym_reset(instance_id, instance=instance, labels={"harness": "gym", **self.labels},
                                             admission_wait=self.admission_wait)
        self.steps = 0
        self.last = None
        ep = self.episode
        return {"instance_id": ep.instance_id, "problem_statement": ep.problem_statement, "cwd": ep.cwd,
                "sandbox_id": ep.sandbox_id}

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
        info.update(outcome=self.last.outcome, result=self.last.result, truncated=not st.done,
                    flaky=self.last.result.flaky)
        return obs, float(self.last.reward), True, info

    def close(self) -> None:
        """End the running episode without grading it."""
        if self.episode is not None:
            self.client.close_sandbox(self.episode.sandbox_id)
            self.episode = None

    def __enter__(self) -> "MsbEnv":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
