"""Where the runs run: in this process or in a pool of spawned worker processes (Ray: :mod:`clustergym.runner.ray_backend`).

:func:`run_tasks` maps a picklable function over tasks in the shared pool of :func:`worker_pool`: workers die
with their parent and ignore SIGINT, a worker that dies costs its task (retried once in a new pool, else
:class:`WorkerDied`), Ctrl-C / SIGTERM stop the workers (:class:`Interrupted`). :func:`run_local` runs the
runner's tasks ``(env_id, agent, seed, horizon, env_kwargs)`` through :func:`clustergym.runner.episode.run_one`, with
the results :func:`clustergym.runner.ray_backend.run_ray` gives, in the same order.
"""

from __future__ import annotations

import contextlib
import functools
import os
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Callable

import numpy as np

from clustergym.runner.episode import run_one
from clustergym.core.family import load_plugins
from clustergym.core.progress import interleaved
from clustergym.runner.ray_backend import _RAY_TASKS, run_tasks_ray
from clustergym.runner.results import RunResult
from clustergym.runner.runstore import (StoredTask, TaskInfo, active_store, describe, placeholder, register_task,
                                        result_type, suspended)

__all__ = ["Interrupted", "WorkerDied", "run_local", "run_tasks", "terminate_pool", "was_interrupted",
           "worker_pool"]


def _run_task(args, report=None):
    """A run of :func:`run_one`; ``report`` receives its progress (slots done): a callable (in this
    process) or a queue (in a worker process)."""
    progress = report if report is None or callable(report) else functools.partial(_put_progress, report)
    return run_one(*args, progress=progress)


def _describe_run(task) -> TaskInfo:
    env_id, agent, _seed, horizon, kw = task[:5]
    return TaskInfo(agent=str(agent), env_id=str(env_id), horizon=int(horizon),
                    config={k: v for k, v in (kw or {}).items() if k != "scenario_seed"})


_METRIC_KEYS: dict[str, list[str]] = {}


def _placeholder_run(task) -> RunResult:
    """What stands in for a missing run in a plan (never written, never reported): the form of a run of this
    env and configuration (its metric names from one slot of ``random``), every value 1 or 2."""
    env_id, agent, seed, horizon, kw = task[:5]
    kw = dict(kw or {})
    inst = kw.get("scenario_seed")
    h = int(horizon)
    form = repr((env_id, sorted((k, repr(v)) for k, v in kw.items() if k != "scenario_seed")))
    if form not in _METRIC_KEYS:
        _METRIC_KEYS[form] = list(run_one(env_id, "random", 0, 1, kw).metrics)
    return RunResult(agent=str(agent), seed=int(seed), total_reward=float(h), mean_reward=1.0, regret=0.0,
                     oracle_total=2.0 * h, steps=h, wall_s=0.0, decision_ms_median=0.0, decision_ms_p95=0.0,
                     metrics={k: 1.0 for k in _METRIC_KEYS[form]}, instance=None if inst is None else int(inst),
                     value_total=float(h), bound_total=2.0 * h, reward=np.ones(h), cum_regret=np.zeros(h))


register_task(_run_task, describe=_describe_run, placeholder=_placeholder_run, own_code=False)  # run_one's code is fingerprinted


def _put_progress(queue, n: int) -> None:
    queue.put(n)


_SHARED_POOL: dict[int, ProcessPoolExecutor] = {}


def _new_pool(workers: int) -> ProcessPoolExecutor:
    """``workers`` spawned processes that die with this one (:func:`_worker_init`) and report the task each
    starts (so a lost task is known when a worker dies: :func:`run_tasks`)."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    started = ctx.SimpleQueue()
    ex = ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_worker_init,
                             initargs=(os.getpid(), started))
    ex._cg_started = started  # type: ignore[attr-defined]
    ex._cg_procs = {}  # type: ignore[attr-defined]  # pid -> Process, every worker this pool ever had
    return ex


@contextlib.contextmanager
def worker_pool(workers: int):
    """Yield a pool of ``workers`` spawned processes, kept for every local ``evaluate(..., workers=workers)``
    inside the block (instead of a new pool per call), e.g. the many short sweeps of ``reproduce``.

    Runs depend only on their arguments, so results are the same with or without the shared pool;
    it saves the start-up of the worker processes (imports, compiled kernels) on every call. The
    workers never outlive this process (:func:`_worker_init`); a pool broken by a dead worker is
    replaced by :func:`run_tasks` (``_SHARED_POOL[workers]`` is then the new one).
    """
    if workers in _SHARED_POOL:  # an outer block already shares one
        yield _SHARED_POOL[workers]
        return
    _SHARED_POOL[workers] = _new_pool(workers)
    try:
        yield _SHARED_POOL[workers]
    except BaseException:  # Ctrl-C, SIGTERM (the CLI turns it into KeyboardInterrupt) or a failed run
        terminate_pool(_SHARED_POOL[workers])
        raise
    else:
        _SHARED_POOL[workers].shutdown(wait=True, cancel_futures=True)
    finally:
        del _SHARED_POOL[workers]


_STARTED = None  # in a worker: the queue it reports the tasks it starts to


def _parent_watchdog(parent: int) -> None:
    while True:
        time.sleep(0.5)
        if os.getppid() != parent:
            os._exit(1)


def _worker_init(parent: int | None = None, started=None) -> None:
    """Workers die with their parent, ignore SIGINT and compute on one thread each.

    The parent-death signal (Linux ``prctl(PR_SET_PDEATHSIG, SIGKILL)``) kills a worker the moment the
    parent dies, even by ``kill -9``; elsewhere a watchdog thread checks the parent's pid twice a second.
    SIGINT is ignored: a Ctrl-C in the terminal reaches the whole process group, and the parent alone
    decides (it terminates the workers), so no worker prints a traceback of its own.
    """
    import signal
    import sys
    import threading

    global _STARTED
    _STARTED = started
    # One compute thread per worker (unless the user set one): the workers already share the cores, and a trained
    # model's batch-1 forward passes ran 5x slower with torch's default two threads per worker on two cores.
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if parent is not None:
        if sys.platform.startswith("linux"):
            try:
                import ctypes

                ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG = 1
            except (OSError, AttributeError):
                pass
        if os.getppid() != parent:  # the parent died before the signal was armed
            os._exit(1)
        threading.Thread(target=_parent_watchdog, args=(parent,), daemon=True, name="clustergym-parent-watchdog").start()
    load_plugins()  # user families registered by entry point (spawned workers start from a fresh import)


def _manager_init(parent: int) -> None:
    _worker_init(parent)


def _tracked(fn: Callable, token: str, i: int, task, report):
    """``fn(task, report)`` in a worker, after telling the parent that this process started task ``i``."""
    if _STARTED is not None:
        _STARTED.put((token, i, os.getpid()))
    return fn(task, report)


def terminate_pool(ex: ProcessPoolExecutor, timeout: float = 5.0) -> None:
    """Stop a pool now: cancel what has not started, terminate the worker processes (kill after ``timeout``)."""
    procs = list((getattr(ex, "_processes", None) or {}).values())
    ex.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        if p.is_alive():
            p.terminate()
    for p in procs:
        p.join(timeout)
        if p.is_alive():
            p.kill()
            p.join(timeout)
    # The pool's manager thread closes its wake-up pipe as it ends; joined here, it is closed before the
    # interpreter's exit hook writes to it (that race printed an OSError traceback after a Ctrl-C / SIGTERM).
    manager = getattr(ex, "_executor_manager_thread", None)
    if manager is not None and manager.is_alive():
        manager.join(timeout)


class Interrupted(KeyboardInterrupt):
    """A sweep stopped by Ctrl-C or SIGTERM; the message says how much was done (nothing is written)."""


def was_interrupted(exc: BaseException | None) -> bool:
    """Whether ``exc`` is Ctrl-C / SIGTERM, or an error raised because of one: compiled code (numba's
    ``SystemError: ... returned a result with an exception set``, torch) wraps a KeyboardInterrupt raised
    inside it as the cause or context of its own error."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, KeyboardInterrupt):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


class WorkerDied(RuntimeError):
    """A run whose worker process died twice (killed, out of memory, a crash in native code)."""


def _describe_task(task) -> str:
    """``hauf seed 3 (instance 3) on clustergym/...`` for a runner task, else a short repr."""
    if isinstance(task, tuple) and len(task) >= 3 and isinstance(task[0], str) and isinstance(task[1], str):
        kw = task[4] if len(task) > 4 and isinstance(task[4], dict) else {}
        inst = f" (instance {kw['scenario_seed']})" if "scenario_seed" in kw else ""
        return f"{task[1]} seed {task[2]}{inst} on {task[0]}"
    text = repr(task)
    return text if len(text) <= 100 else text[:97] + "..."


def _drain_started(ex, token: str, started: dict) -> None:
    q = getattr(ex, "_cg_started", None)
    procs = getattr(ex, "_cg_procs", None)
    if procs is not None:
        procs.update(getattr(ex, "_processes", None) or {})
    if q is None:
        return
    try:
        while not q.empty():
            tok, i, pid = q.get()
            if tok == token:
                started[i] = pid
    except (OSError, EOFError):
        pass


def _exit_note(code) -> str:
    import signal

    if code is None:
        return "died"
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


def run_tasks(fn: Callable, tasks: list, workers: int, *, report=None, on_start: Callable | None = None,
              on_done: Callable | None = None, on_reused: Callable | None = None) -> list:
    """``[fn(task, report) for task in tasks]``, in this process (``workers == 1``) or in the shared pool
    of spawned worker processes (:func:`worker_pool`); results in task order.

    ``fn`` must be picklable (a module-level function) for ``workers > 1``. ``on_start(task)`` (in this
    process only) and ``on_done(result)`` are called around each task. Ctrl-C stops the workers and
    raises :class:`Interrupted`; a failed task cancels the pending ones and re-raises.

    A worker process that dies (killed, out of memory) costs its task, not the sweep: the finished
    results are kept, the pool is replaced and the unfinished tasks run again (one line on stderr says
    so); a task whose worker dies a second time is a :class:`WorkerDied` naming it. Tasks are pure
    functions of their arguments, so a retried task gives the result it would have given (as Ray's
    retries do).

    Inside :func:`clustergym.runner.runstore.use_store`, finished tasks are read from the store (``on_reused(result)``
    instead of ``on_done`` for each) and each task that runs is written to it as soon as it ends.
    """
    store = active_store()
    if store is not None:
        return _run_stored(store, fn, tasks, workers, report=report, on_start=on_start, on_done=on_done,
                           on_reused=on_reused)
    if workers > 1 and _RAY_TASKS:  # inside ray_tasks(): the tasks go to the connected Ray instance
        return run_tasks_ray(fn, tasks, workers, on_done=on_done)
    if workers == 1:
        return _run_here(fn, tasks, report, on_start, on_done)
    return _run_in_pool(fn, tasks, workers, report, on_done)


def _run_here(fn: Callable, tasks: list, report, on_start: Callable | None, on_done: Callable | None) -> list:
    """:func:`run_tasks` in this process, one task after the other; Ctrl-C is :class:`Interrupted`."""
    out: list = [None] * len(tasks)
    i = 0
    try:
        for i, task in enumerate(tasks):
            if on_start is not None:
                on_start(task)
            out[i] = fn(task, report)
            if on_done is not None:
                on_done(out[i])
    except BaseException as exc:  # Ctrl-C, also when compiled code (numba) wrapped it in a SystemError
        if not isinstance(exc, Interrupted) and was_interrupted(exc):
            raise Interrupted(f"interrupted after {i} of {len(tasks)} runs; these runs were discarded (no "
                              "results of this sweep were written)") from None
        raise
    return out


def _run_in_pool(fn: Callable, tasks: list, workers: int, report, on_done: Callable | None) -> list:
    """:func:`run_tasks` in the shared pool of ``workers`` processes: the tasks a dead worker cost run again in a
    new pool (:func:`_charge_dead_workers`); Ctrl-C stops the workers and is :class:`Interrupted`."""
    import uuid
    from concurrent.futures.process import BrokenProcessPool

    out: list = [None] * len(tasks)
    token = uuid.uuid4().hex
    pending = list(range(len(tasks)))
    lost: dict[int, int] = {}
    started: dict[int, int] = {}
    blind = 0
    with worker_pool(workers):
        while pending:
            ex = _SHARED_POOL[workers]
            futs = {ex.submit(_tracked, fn, token, i, tasks[i], report): i for i in pending}
            _drain_started(ex, token, started)
            try:
                for fut in as_completed(futs):
                    i = futs[fut]
                    out[i] = fut.result()
                    pending.remove(i)
                    _drain_started(ex, token, started)
                    if on_done is not None:
                        on_done(out[i])
            except BrokenProcessPool:
                for fut, i in futs.items():  # keep what finished before the pool broke
                    if i in pending and fut.done() and not fut.cancelled() and fut.exception() is None:
                        out[i] = fut.result()
                        pending.remove(i)
                        if on_done is not None:
                            on_done(out[i])
                _drain_started(ex, token, started)
                blind = _charge_dead_workers(ex, tasks, pending, started, lost, blind)
                terminate_pool(ex)
                _SHARED_POOL[workers] = _new_pool(workers)
                started.clear()
            except KeyboardInterrupt:
                for f in futs:
                    f.cancel()
                done = sum(r is not None for r in out)
                raise Interrupted(f"interrupted after {done} of {len(tasks)} runs; the workers were stopped and "
                                  "these runs discarded (no results of this sweep were written)") from None
            except BaseException:
                for f in futs:  # a failed run stops this call's pending runs
                    f.cancel()
                raise
    return out


def _dead_workers(ex) -> dict[int, int]:
    """The exit codes of the broken pool ``ex``'s workers that died, by pid (not the ones the pool stopped)."""
    procs = ex._cg_procs
    # The pool's manager thread reaps the workers as the pool breaks; an exit code read while it
    # waits on the same process can come back empty (both wait, one gets it), so it ends first.
    manager = getattr(ex, "_executor_manager_thread", None)
    if manager is not None and manager.is_alive():
        manager.join(5.0)
    for p in procs.values():
        p.join(2.0)  # reap: the exit code tells the dead from the ones the pool stopped
    return {pid: p.exitcode for pid, p in procs.items()
            if p.exitcode is not None and p.exitcode != -15}  # -SIGTERM: stopped by the pool


def _charge_dead_workers(ex, tasks: list, pending: list[int], started: dict, lost: dict, blind: int) -> int:
    """After the pool ``ex`` broke: charge each unfinished task whose worker died with a loss (``lost``), raise
    :class:`WorkerDied` for a task lost twice (or a second death no task can be blamed for), else say on stderr
    that the unfinished tasks run again. Returns the new count of such blind deaths in a row."""
    import sys

    dead = _dead_workers(ex)
    hit = [i for i in pending if started.get(i) in dead]
    if not hit:
        blind += 1
        hit = [i for i in pending if i in started]
        if blind >= 2:
            raise WorkerDied(f"worker processes died twice during this sweep (last during "
                             f"{_describe_task(tasks[hit[0]]) if hit else 'start-up'}); "
                             "nothing of this sweep was written") from None
    else:
        blind = 0
    for i in hit:
        lost[i] = lost.get(i, 0) + 1
        if lost[i] >= 2:
            code = dead.get(started.get(i))
            if code is None and len(dead) == 1:  # its start notice was lost with the process: the
                code = next(iter(dead.values()))  # one worker that died is its worker
            raise WorkerDied(f"run {_describe_task(tasks[i])} failed twice: its worker process "
                             f"{_exit_note(code)} (out of memory?); nothing of this "
                             "sweep was written") from None
    names = ", ".join(_describe_task(tasks[i]) for i in hit[:3]) or "a run"
    codes = ", ".join(f"pid {pid} {_exit_note(c)}" for pid, c in dead.items()) or "a worker died"
    print(f"clustergym: a worker process died ({codes}) during {names}; retrying the "
          f"{len(pending)} unfinished run(s) in new workers ({len(tasks) - len(pending)} finished kept)",
          file=sys.stderr)
    return blind


def _run_stored(store, fn: Callable, tasks: list, workers: int, *, report, on_start, on_done, on_reused) -> list:
    """:func:`run_tasks` through a run store: the stored results, then the missing tasks (each written as it
    ends); in a plan, placeholders for the missing ones."""
    out: list = [None] * len(tasks)
    keys = [store.key(fn, t) for t in tasks]
    missing = []
    for i, k in enumerate(keys):
        found, result, _ = store.load(k)
        if found and not isinstance(result, result_type(fn, tasks[i]) or object):
            found = False  # not a result of fn (a crafted file): run it
        if found:
            out[i] = result
            store.reused += 1
            if store.plan:
                store.found.append((store.label, describe(fn, tasks[i]), k))
            if on_reused is not None:
                on_reused(result)
        else:
            missing.append(i)
    if store.plan:
        for i in missing:
            store.planned.append((store.label, describe(fn, tasks[i]), keys[i]))
            out[i] = placeholder(fn, tasks[i])
        return out
    if missing:
        stored = StoredTask(fn, store.folder, store.code, store.label)
        with suspended():
            got = run_tasks(stored, [tasks[i] for i in missing], workers, report=report, on_start=on_start,
                            on_done=on_done)
        for i, r in zip(missing, got):
            out[i] = r
        store.ran += len(missing)
    return out


def run_local(tasks: list[tuple], workers: int, bar) -> list[RunResult]:
    """The runs in this process or the worker pool, round-robin over the agents (so the progress bar measures
    every agent's cost early: :mod:`clustergym.core.progress`); results in the order of ``tasks``."""
    order = interleaved(tasks)
    mine = [tasks[i] for i in order]
    reused = None if bar is None else (lambda r: bar.update(r.steps))  # the bar counts reused runs as done
    if workers == 1:
        start = None if bar is None else getattr(bar, "start_task", None)
        done = _unordered(run_tasks(_run_task, mine, 1, report=None if bar is None else bar.update, on_start=start,
                                    on_reused=reused), order)
        return done
    with _progress_queue(bar) as queue:
        done = None if bar is None else getattr(bar, "run_done", None)
        return _unordered(run_tasks(_run_task, mine, workers, report=queue, on_done=done, on_reused=reused), order)


def _unordered(results: list, order: list[int]) -> list:
    out: list = [None] * len(order)
    for r, i in zip(results, order):
        out[i] = r
    return out


@contextlib.contextmanager
def _progress_queue(bar):
    """A queue the workers report their slots to, drained into ``bar`` by a thread (so the bar moves
    during long runs, not only when a whole run ends); ``None`` without a bar."""
    if bar is None:
        yield None
        return
    import multiprocessing as mp
    import queue as queue_mod
    import threading

    from multiprocessing.managers import SyncManager

    manager = SyncManager(ctx=mp.get_context("spawn"))
    manager.start(_manager_init, (os.getpid(),))  # the manager process dies with this one too
    q = manager.Queue()
    stop = threading.Event()

    def drain():
        while not stop.is_set() or not q.empty():
            try:
                bar.update(q.get(timeout=0.2))
            except queue_mod.Empty:
                continue
            except (EOFError, OSError, BrokenPipeError):  # the manager went away (interrupt)
                return

    th = threading.Thread(target=drain, daemon=True)
    th.start()
    try:
        yield q
    finally:
        stop.set()
        th.join(timeout=5)
        manager.shutdown()
