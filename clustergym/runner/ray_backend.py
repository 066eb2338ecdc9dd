"""The Ray backend: runs as Ray tasks, with the results of the local worker pool.

:func:`ray_session` connects to the Ray instance this process is connected to, else ``$RAY_ADDRESS``, else a
local one it starts. :func:`run_ray` runs the runner's tasks ``(env_id, agent, seed, horizon, env_kwargs)``
through :func:`clustergym.runner.episode.run_one`, one Ray task each; :func:`run_tasks_ray` maps a picklable function
over tasks; inside :func:`ray_tasks`, :func:`clustergym.runner.workers.run_tasks` sends its tasks to Ray.
"""

from __future__ import annotations

import contextlib
import logging
import os
from typing import Callable

from clustergym.runner.episode import run_one
from clustergym.runner.results import RunResult

__all__ = ["import_ray", "ray_session", "ray_tasks", "run_ray", "run_tasks_ray"]


def import_ray():
    """The ``ray`` module; a ValueError naming the extra to install when Ray is missing."""
    try:
        import ray
    except ImportError:  # a ValueError like every missing optional extra (see clustergym.learning.algos.algo_class)
        raise ValueError("backend='ray' needs Ray: pip install 'clustergym[ray]'") from None
    return ray


def _probe_ray_address(address: str, timeout: float = 10.0) -> None:
    """One TCP connection to ``host:port`` of ``$RAY_ADDRESS`` (``ray://`` or plain), within ``timeout`` s."""
    import socket

    hostport = address.split("://", 1)[-1].rstrip("/")
    if hostport in ("auto", "local") or ":" not in hostport:
        return
    host, _, port = hostport.rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except (OSError, ValueError) as exc:
        raise ValueError(f"backend='ray': nothing answers at RAY_ADDRESS={address!r} within {timeout:g} s ({exc}); "
                         "start the cluster or unset RAY_ADDRESS to run a local Ray") from None


@contextlib.contextmanager
def ray_session(workers: int):
    """Yield the ``ray`` module, connected: to the Ray instance this process is already connected to
    (``ray.init(address=...)``), else to ``$RAY_ADDRESS`` when set, else to a private local instance with
    ``workers`` CPUs started here. Shuts down only what it started (a connection to ``$RAY_ADDRESS`` is
    closed, the cluster lives on)."""
    ray = import_ray()
    started = False
    if not ray.is_initialized():
        if address := os.environ.get("RAY_ADDRESS"):
            _probe_ray_address(address)  # ray.init would wait minutes for an address where nothing listens
            try:
                ray.init(log_to_driver=False)
            except ConnectionError as exc:  # a user error: one line on the command line, not a traceback
                raise ValueError(f"backend='ray' cannot connect to RAY_ADDRESS={address!r} ({exc}); if the "
                                 "cluster uses token authentication, set RAY_AUTH_MODE=token") from exc
        else:
            ray.init(address="local", num_cpus=workers, include_dashboard=False, log_to_driver=False,
                     ignore_reinit_error=True, logging_level=logging.WARNING)
        started = True
    try:
        yield ray
    finally:
        if started:
            ray.shutdown()


_RAY_TASKS: list = []  # non-empty inside ray_tasks()


@contextlib.contextmanager
def ray_tasks(workers: int):
    """Inside the block, :func:`clustergym.runner.workers.run_tasks` with ``workers > 1`` (and so every local
    ``evaluate`` and every sweep of ``reproduce``) runs its tasks as Ray tasks on one Ray session
    (:func:`ray_session`: the instance this process is connected to, else ``$RAY_ADDRESS``, else a local one
    with ``workers`` CPUs), opened once for the block. Tasks are pure functions of their arguments, so the
    results are the local pool's; progress bars move per finished task only."""
    with ray_session(workers):
        _RAY_TASKS.append(workers)
        try:
            yield
        finally:
            _RAY_TASKS.pop()


def _apply(fn: Callable, task):
    """``fn(task, None)``: a task of :func:`run_tasks_ray` on a Ray worker."""
    return fn(task, None)


def run_tasks_ray(fn: Callable, tasks: list, workers: int, *, on_done: Callable | None = None) -> list:
    """``[fn(task, None) for task in tasks]`` as Ray tasks (one CPU each; :func:`ray_session`), results in task
    order; ``on_done(result)`` in this process as each finishes. ``fn`` must be a module-level function whose
    effects are the same wherever it runs (e.g. files on a file system every node sees). A failed task cancels
    the others and re-raises; Ctrl-C cancels them too."""
    with ray_session(workers) as ray:
        remote = ray.remote(num_cpus=1)(_apply)  # ``fn`` may be a callable object (a stored task)
        refs = [remote.remote(fn, task) for task in tasks]
        index = {ref: i for i, ref in enumerate(refs)}
        out: list = [None] * len(tasks)
        pending = list(refs)
        try:
            while pending:
                done, pending = ray.wait(pending, num_returns=1)
                for ref in done:
                    out[index[ref]] = ray.get(ref)
                    if on_done is not None:
                        on_done(out[index[ref]])
        except BaseException:
            for ref in pending:
                ray.cancel(ref, force=True)
            raise
        return out


def run_ray(tasks: list[tuple], workers: int, bar) -> list[RunResult]:
    """Each task is one Ray task; results go back to task order, so they equal the local backend's
    (the Ray instance of :func:`ray_session`). Runs are pure functions of their arguments, so Ray may
    retry one whose worker died."""
    with ray_session(workers) as ray:
        remote_run = ray.remote(num_cpus=1)(run_one)
        refs = [remote_run.remote(*task) for task in tasks]
        index = {ref: i for i, ref in enumerate(refs)}
        runs: list[RunResult | None] = [None] * len(tasks)
        pending = list(refs)
        try:
            while pending:
                done, pending = ray.wait(pending, num_returns=1)
                for ref in done:
                    i = index[ref]
                    runs[i] = ray.get(ref)
                    if bar is not None:
                        bar.update(runs[i].steps)
        except BaseException:
            for ref in pending:
                ray.cancel(ref, force=True)
            raise
        return runs  # type: ignore[return-value]
