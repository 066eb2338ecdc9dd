"""The per-run result store: every finished run written to disk as it ends, reused by the next sweep.

A run of the worker pool (:func:`clustergym.runner.workers.run_tasks`) is a pure function of its arguments: the same
task function, the same task (env id, agent, seed, horizon, env kwargs, ...) and the same code give the same
result. Inside ``with use_store(RunStore(folder)):`` every such run is first looked up in ``folder``; a finished
run is reused, a missing one is run and written atomically (a temporary file renamed into place) by the process
that ran it, as soon as it ends. So a sweep that is killed (Ctrl-C, SIGTERM, ``kill -9``, a reboot) loses only the
runs in flight, and running it again finishes from the store with the results an uninterrupted sweep gives (the
timing fields aside: :data:`clustergym.runner.results.TIMING_FIELDS`).

**Keys.** A run's file is named by a hash of the task function's name, the task (canonical JSON, arrays and
other objects by the hash of their bytes) and the code the run can reach: the **code fingerprint**
(:func:`code_fingerprint`: every module of the envs, agents, baselines, core and runner but those of
:data:`NOT_IN_RUNS`), the source of the task function's module together with every module of clustergym (and
of the task module's own package) that it imports, directly or through each other, whether listed in
:data:`NOT_IN_RUNS` or not (:func:`~clustergym.runner.codescan.reachable_sources`: an experiment's task calling another experiment module's
episode function keys on both), and the learning modules' fingerprint for a trained model's run. Editing any
of these makes every earlier run it keys stale, and stale runs are never reused (they stay on disk, under their
fingerprint's folder, until removed); editing a report module no task module imports re-runs nothing. Code a
task reaches only by name (an env id, an agent name, a plugin) is covered where it lives in the fingerprinted
modules.

**Merging.** Files never collide unless they hold the same run, so stores computed on other machines (or by
Ray workers writing to a shared file system) merge by copying their folders into one.

**Plans.** ``RunStore(folder, plan=True)`` runs nothing: the store answers with finished runs where it has
them and with a placeholder otherwise, and lists the missing runs with a CPU-time estimate from the unit
costs measured on stored runs (CPU seconds per slot of the same agent at the same configuration);
:func:`clustergym.experiments.plan` prints it.

The files are pickles read back by a restricted unpickler (:class:`_SafeUnpickler`: numpy arrays, plain
containers and :class:`~clustergym.runner.results.RunResult` only), so a crafted file cannot run code, nor make
an array or bytes larger than the file (refused before they are allocated). Only regular files are opened (a
FIFO named like a run would block), and a file that is not a record of the run's form (a dict whose result has
the type of the task function's results; costs in range) counts as missing: the run is computed again.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import io
import json
import math
import os
import pickle
import stat
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import numpy as np

from clustergym.runner.codescan import reachable_sources
from clustergym.runner.results import atomic_write

__all__ = ["RunStore", "StoredTask", "TaskInfo", "active_store", "code_fingerprint", "describe", "fingerprint_files",
           "result_type",
           "config_key", "placeholder", "register_task", "suspended", "use_store"]

# Modules that only present, schedule, store or report runs, or only train: editing them cannot change what an
# agent does in a run, so they are left out of the code fingerprint (a report fix does not re-run the papers).
# The learning modules only training uses are listed too: no evaluation run imports them (a test checks).
TRAINING_ONLY = tuple(os.path.join("learning", f) for f in (
    "training.py", "checkpoints.py", "curves.py", "imitation.py", "importing.py", "pools.py", "vec.py", "tuning.py"))
NOT_IN_RUNS = ("experiments", "cli", "bench", *(os.path.join("core", f) for f in ("viewer.py", "plots.py", "progress.py",
                                                                                 "outdir.py")),
               *(os.path.join("runner", f) for f in ("runstore.py", "codescan.py", "workers.py", "replay.py")),
               *TRAINING_ONLY)


NO_RUN_BASENAMES = ("render.py",)  # a family's renderer draws frames of an episode and cannot change it


def fingerprint_files(learning: bool | None = None) -> list[str]:
    """The sources a run depends on: every ``.py`` file of ``clustergym`` and of its envs, agents and baselines,
    wherever they are installed from, except the modules of :data:`NOT_IN_RUNS` and the renderers.
    ``learning=False``: without ``clustergym/learning`` (what every agent but a trained model runs: no such run
    imports it, tested); ``True``: only its files (what a trained model's run adds); ``None``: both."""
    pkg = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the clustergym package (this file: runner/)
    roots = {pkg}
    for name in ("clustergym.envs", "clustergym.agents", "clustergym.baselines"):
        spec = importlib.util.find_spec(name)
        if spec is not None:
            roots.update(os.path.abspath(d) for d in (spec.submodule_search_locations or []))
    skip = tuple(os.path.join(pkg, s) for s in NOT_IN_RUNS)
    lrn = os.path.join(pkg, "learning") + os.sep
    files = {os.path.realpath(p) for root in roots for d, _, fs in os.walk(root)
             for p in (os.path.join(d, f) for f in fs if f.endswith(".py") and f not in NO_RUN_BASENAMES)
             if not any(p == s or p.startswith(s + os.sep) for s in skip)}
    if learning is not None:
        files = {p for p in files if p.startswith(os.path.realpath(lrn)) == learning}
    return sorted(files)


_FINGERPRINT: dict = {}


def code_fingerprint(learning: bool = False) -> str:
    """A hash of :func:`fingerprint_files` (computed once per process): by default the code of every run but
    a trained model's; ``learning=True``: the learning modules a trained model's run adds."""
    if learning not in _FINGERPRINT:
        h = hashlib.sha256()
        for path in fingerprint_files(learning):
            with open(path, "rb") as fh:
                h.update(os.path.basename(path).encode() + fh.read())
        _FINGERPRINT[learning] = h.hexdigest()[:16]
    return _FINGERPRINT[learning]


_MODULE_HASHES: dict[str, str] = {}
def _module_hash(fn: Callable) -> str:
    """The hash of the source of ``fn``'s module and of every package module it imports
    (:func:`~clustergym.runner.codescan.reachable_sources`), so a run of a task function keys on the code it calls wherever that lives
    (an experiment's episode function in another experiment module included); read once per process, as the code
    fingerprint is."""
    name = getattr(fn, "__module__", "") or ""
    if name not in _MODULE_HASHES:
        files = reachable_sources(name)
        h = hashlib.sha256()
        for mod in sorted(files):
            with open(files[mod], "rb") as fh:
                h.update(mod.encode() + b"\0" + hashlib.sha256(fh.read()).digest())
        _MODULE_HASHES[name] = h.hexdigest()[:12] if files else "-"
    return _MODULE_HASHES[name]


def _canonical(obj: Any) -> Any:
    """A JSON-able form of a task that identifies it: dicts with sorted keys, numbers exact (``repr``), arrays
    and other objects by the hash of their bytes."""
    if isinstance(obj, dict):
        return {"__dict__": [[_canonical(k), _canonical(v)] for k, v in sorted(obj.items(), key=lambda kv: repr(kv[0]))]}
    if isinstance(obj, (list, tuple)):
        return [type(obj).__name__, [_canonical(x) for x in obj]]
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        return repr(float(obj))
    if isinstance(obj, np.ndarray):
        return {"__nd__": [str(obj.dtype), list(obj.shape), hashlib.sha256(np.ascontiguousarray(obj).tobytes()).hexdigest()]}
    return {"__obj__": [type(obj).__qualname__, hashlib.sha256(pickle.dumps(obj, protocol=4)).hexdigest()]}


@dataclass
class TaskInfo:
    """What a plan needs to know of a task: the agent, the env, the slots it runs and the configuration its unit
    cost is shared with (everything but the instance and the seed)."""
    agent: str
    env_id: str
    horizon: int
    config: dict = field(default_factory=dict)


@dataclass
class _TaskKind:
    describe: Callable[[tuple], TaskInfo]
    placeholder: Callable[[tuple], Any]
    own_code: bool = True
    result: type | None = None  # the type of the results (:func:`result_type`)


_KINDS: dict[str, _TaskKind] = {}


def _fn_name(fn: Callable) -> str:
    return f"{fn.__module__}.{getattr(fn, '__qualname__', getattr(fn, '__name__', repr(fn)))}"


def register_task(fn: Callable, *, describe: Callable[[tuple], TaskInfo], placeholder: Callable[[tuple], Any],
                  own_code: bool = True) -> None:
    """Tell the store what a task of ``fn`` runs (``describe``: for plans and unit costs) and what stands in for
    its result in a plan (``placeholder``: a value of the result's form, never written anywhere).
    ``own_code=False``: ``fn`` only hands its task to fingerprinted code (the runner's episode), so the sources of
    its module and of the modules it imports (:func:`~clustergym.runner.codescan.reachable_sources`) do not key its runs."""
    _KINDS[_fn_name(fn)] = _TaskKind(describe, placeholder, own_code)


def config_key(info: TaskInfo) -> str:
    return json.dumps([info.agent, info.env_id, _canonical(info.config)], sort_keys=True)


def _runs_a_model(task) -> bool:
    """Does the task name a trained model (an ``sb3:`` agent) anywhere in its top level?"""
    items = task if isinstance(task, (tuple, list)) else (task,)
    return any(isinstance(x, str) and x.startswith("sb3:") for x in items)


class _SafeUnpickler(pickle.Unpickler):
    """Reads only what the store writes: plain containers, numpy arrays and scalars, :class:`RunResult`."""

    ALLOWED = {
        ("builtins", n) for n in ("dict", "list", "tuple", "set", "frozenset", "float", "int", "str", "bool",
                                  "complex", "bytes", "bytearray", "slice")
    } | {
        ("collections", "OrderedDict"), ("clustergym.runner.results", "RunResult"),
        ("numpy", "ndarray"), ("numpy", "dtype"), ("numpy.core.multiarray", "_reconstruct"),
        ("numpy.core.multiarray", "scalar"), ("numpy._core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "scalar"), ("numpy", "float64"), ("numpy", "int64"), ("numpy", "bool_"),
        ("numpy.dtypes", "Float64DType"), ("numpy.dtypes", "Int64DType"), ("numpy.dtypes", "Float32DType"),
        ("numpy.dtypes", "Int32DType"), ("numpy.dtypes", "BoolDType"), ("numpy.dtypes", "Int8DType"),
        ("numpy.dtypes", "UInt8DType"),
    }

    def __init__(self, data: bytes):
        super().__init__(io.BytesIO(data))
        self.limit = len(data)  # no array or bytes a file of this size holds can be larger than it

    def find_class(self, module: str, name: str):
        if (module, name) not in self.ALLOWED:
            raise pickle.UnpicklingError(f"a run store file may not hold {module}.{name}")
        found = super().find_class(module, name)
        if name == "_reconstruct":
            return lambda cls, shape, dtype: found(cls, self._fits(shape, np.dtype(dtype)), dtype)
        if (module, name) == ("numpy", "dtype"):
            return self._plain_dtype
        if name in ("bytes", "bytearray"):
            return lambda *a: found(*self._fits_bytes(a))
        return found

    def _fits(self, shape, dtype: np.dtype) -> tuple:
        """``shape`` if an array of it fits in the file, refused before anything is allocated otherwise."""
        dims = tuple(int(d) for d in (shape if isinstance(shape, (tuple, list)) else (shape,)))
        if any(d < 0 for d in dims) or math.prod(dims) * max(dtype.itemsize, 1) > self.limit:
            raise pickle.UnpicklingError(f"an array of shape {dims} cannot be held by a {self.limit}-byte file")
        return dims

    def _fits_bytes(self, args: tuple) -> tuple:
        if args and isinstance(args[0], int) and not 0 <= args[0] <= self.limit:
            raise pickle.UnpicklingError(f"{args[0]} bytes cannot be held by a {self.limit}-byte file")
        return args

    @staticmethod
    def _plain_dtype(*args):
        dt = np.dtype(*args)
        if dt.hasobject:  # an object array's elements are allocated before their count is checked
            raise pickle.UnpicklingError("a run store file may not hold object arrays")
        return dt


def _read_regular(path: str) -> bytes | None:
    """The bytes of ``path`` if it is a regular file (never opened otherwise: a FIFO would block), else None."""
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return None
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(fd, "rb") as f:
            return f.read() if stat.S_ISREG(os.fstat(f.fileno()).st_mode) else None  # swapped in meanwhile
    except OSError:
        return None


MAX_HORIZON = 2 ** 53  # slots a record may claim (a float counts them exactly)
MAX_CPU_S = 1e12  # CPU seconds a record may claim


def _sound_costs(rec: dict) -> bool:
    """Does a record's cost part (what plans sum) hold what :meth:`RunStore.save` writes: a CPU time and a
    horizon (or none) in range, a configuration text (or none)?"""
    cpu, h, cfg = rec.get("cpu_s"), rec.get("horizon"), rec.get("config")
    return (isinstance(cpu, float) and 0.0 <= cpu <= MAX_CPU_S
            and (h is None or (type(h) is int and 1 <= h <= MAX_HORIZON)) and (cfg is None or isinstance(cfg, str)))


class RunStore:
    """A folder of finished runs (module docstring). ``plan=True``: run nothing, list what is missing."""

    def __init__(self, folder: str, *, plan: bool = False, code: str | None = None):
        self.folder = os.path.abspath(folder)
        self.plan = bool(plan)
        self.code = code or code_fingerprint()
        self.label = ""  # the part of a reproduction being run (a paper's name): recorded with each run
        self.reused = 0
        self.ran = 0
        self.planned: list[tuple[str, TaskInfo, str]] = []  # (label, info, key) of every missing run (plan mode)
        self.found: list[tuple[str, TaskInfo, str]] = []  # (label, info, key) of every stored run a plan met

    # -- keys and files --------------------------------------------------------------------------------------
    def key(self, fn: Callable, task) -> str:
        kind = _KINDS.get(_fn_name(fn))
        own = _module_hash(fn) if kind is None or kind.own_code else "-"
        parts = [_fn_name(fn), own, _canonical(task)]
        if _runs_a_model(task):  # a trained model's run also depends on the learning modules
            parts.append(code_fingerprint(learning=True))
        doc = json.dumps(parts, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(doc.encode()).hexdigest()[:32]

    def path(self, key: str) -> str:
        return os.path.join(self.folder, self.code, key[:2], key + ".pkl")

    def load(self, key: str) -> tuple[bool, Any, dict]:
        """``(found, result, record)`` of a stored run; a file that cannot be read, is not a regular file (a FIFO,
        a link, a folder) or is not a record (a dict with a result) counts as missing."""
        data = _read_regular(self.path(key))
        if data is None:
            return False, None, {}
        try:
            rec = _SafeUnpickler(data).load()
        except Exception:  # noqa: BLE001 - whatever a damaged or crafted file makes the unpickler raise: missing
            return False, None, {}
        if not isinstance(rec, dict) or "result" not in rec:
            return False, None, {}
        return True, rec["result"], rec

    def save(self, key: str, fn: Callable, task, result, cpu_s: float, wall_s: float, label: str) -> None:
        info = describe(fn, task)
        rec = {"result": result, "fn": _fn_name(fn), "task": json.dumps(_canonical(task), sort_keys=True),
               "label": label, "cpu_s": float(cpu_s), "wall_s": float(wall_s),
               "agent": None if info is None else info.agent, "env_id": None if info is None else info.env_id,
               "horizon": None if info is None else int(info.horizon),
               "config": None if info is None else config_key(info), "code": self.code}
        data = pickle.dumps(rec, protocol=4)
        os.makedirs(os.path.dirname(self.path(key)), exist_ok=True)
        atomic_write(self.path(key), lambda f: f.write(data), binary=True)

    def records(self) -> Iterator[dict]:
        """Every readable record of this code fingerprint (without its result)."""
        root = os.path.join(self.folder, self.code)
        if not os.path.isdir(root):
            return
        for d in sorted(os.listdir(root)):
            sub = os.path.join(root, d)
            if not os.path.isdir(sub):
                continue
            for name in sorted(os.listdir(sub)):
                if name.endswith(".pkl"):
                    ok, _, rec = self.load(name[:-4])
                    if ok and _sound_costs(rec):
                        rec = dict(rec)
                        rec.pop("result", None)
                        rec["key"] = name[:-4]
                        yield rec

    def unit_costs(self) -> dict[str, float]:
        """CPU seconds per slot of every configuration with stored runs (:meth:`unit_cost_records`)."""
        return {k: c for k, (c, _) in self.unit_cost_records().items()}

    def unit_cost_records(self) -> dict[str, tuple[float, int]]:
        """``(CPU seconds per slot, the longest measured horizon)`` of every configuration (agent, env, kwargs but
        instance and seed) with stored runs: from this fingerprint's runs, else from earlier fingerprints' (a unit
        cost is a measurement, not a result, so an older one is a fair estimate until the current code has been
        measured)."""
        if not os.path.isdir(self.folder):
            return {}
        codes = [self.code] + sorted(c for c in os.listdir(self.folder)
                                     if c != self.code and os.path.isdir(os.path.join(self.folder, c)))
        out: dict[str, tuple[float, int]] = {}
        for code in codes:
            sums: dict[str, list[float]] = {}
            for rec in RunStore(self.folder, code=code).records():
                if rec.get("config") and rec.get("horizon"):
                    s = sums.setdefault(rec["config"], [0.0, 0.0, 0])
                    s[0] += rec["cpu_s"]
                    s[1] += rec["horizon"]
                    s[2] = max(s[2], int(rec["horizon"]))
            for k, (c, n, h) in sums.items():
                if n > 0 and k not in out:
                    out[k] = (c / n, int(h))
        return out


def placeholder(fn: Callable, task) -> Any:
    """The stand-in for a missing run of ``fn`` in a plan (:func:`register_task`)."""
    kind = _KINDS.get(_fn_name(fn))
    if kind is None:
        raise ValueError(f"a plan cannot stand in for the tasks of {_fn_name(fn)}: register it with "
                         "clustergym.runner.runstore.register_task")
    return kind.placeholder(task)


def result_type(fn: Callable, task) -> type | None:
    """The type of ``fn``'s results (that of its placeholder: :func:`register_task`; found once per process), None
    for an unregistered task function: a stored result of another type is not a run of ``fn``."""
    kind = _KINDS.get(_fn_name(fn))
    if kind is None:
        return None
    if kind.result is None:
        kind.result = type(kind.placeholder(task))
    return kind.result


def describe(fn: Callable, task) -> TaskInfo | None:
    kind = _KINDS.get(_fn_name(fn))
    return None if kind is None else kind.describe(task)  # a registered describer that fails is a bug: it raises


class StoredTask:
    """``fn(task, report)`` that writes its result into the store as soon as it ends (picklable: it runs in the
    worker processes)."""

    def __init__(self, fn: Callable, folder: str, code: str, label: str):
        self.fn, self.folder, self.code, self.label = fn, folder, code, label

    def __call__(self, task, report=None):
        t0, c0 = time.perf_counter(), time.process_time()
        result = self.fn(task, report)
        store = RunStore(self.folder, code=self.code)
        store.save(store.key(self.fn, task), self.fn, task, result, time.process_time() - c0,
                   time.perf_counter() - t0, self.label)
        return result


_ACTIVE: list[RunStore] = []


def active_store() -> RunStore | None:
    """The store of the innermost :func:`use_store` block of this process, if any."""
    return _ACTIVE[-1] if _ACTIVE else None


@contextlib.contextmanager
def use_store(store: RunStore | None):
    """Every :func:`clustergym.runner.workers.run_tasks` inside the block reads and writes ``store`` (``None``: no
    store)."""
    if store is None:
        yield None
        return
    _ACTIVE.append(store)
    try:
        yield store
    finally:
        _ACTIVE.remove(store)


@contextlib.contextmanager
def suspended():
    """No store inside the block (the store's own sub-sweeps)."""
    saved = list(_ACTIVE)
    _ACTIVE.clear()
    try:
        yield
    finally:
        _ACTIVE[:] = saved
