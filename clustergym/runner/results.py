"""The results of a comparison, and the one place that writes ``results.json``.

:class:`RunResult` is one run (agent, instance, seed), :class:`Results` a whole comparison; ``Results.write``
writes ``results.json`` (the schema of docs/results-schema.md: fields are added, never renamed),
``curves.csv`` and the plots. The file names are :data:`RESULTS_FILE`, :data:`CURVES_FILE` and
:data:`RUN_FILES`; :func:`write_json` writes the ``results.json`` of an experiment whose runs span several
configurations (:func:`clustergym.experiments.write_summary`). The normalised score is defined in
:mod:`clustergym.runner.evaluation`; :data:`SCORE_DEFINITION` is its one-line statement in ``results.json``.
"""

from __future__ import annotations

import csv
import json
import math
import os
import stat
from dataclasses import asdict, dataclass, field
import numpy as np

from clustergym.core.plots import plot_results
from clustergym.core.stats import fmt_ci, paired_comparison

__all__ = ["TIMING_FIELDS", "RESULTS_FILE", "CURVES_FILE", "RUN_FILES", "SCORE_DEFINITION", "RunResult", "Results",
           "aligned_table", "atomic_write", "attach_scores", "check_file_target", "exclusive_write", "strict_json", "write_json"]

RESULTS_FILE = "results.json"
CURVES_FILE = "curves.csv"
# What ``clustergym run`` writes into its --out: the results, the curves and the plots of plot_results.
RUN_FILES = (RESULTS_FILE, CURVES_FILE, "avg_reward.png", "cumulative_regret.png", "paired_difference.png")
# Fields of results.json that measure time on the machine that ran them: they differ between any two
# runs (even two local ones); everything else is a function of (env, agents, seeds, horizon, kwargs).
TIMING_FIELDS = ("wall_s", "decision_ms_median", "decision_ms_p95")


@dataclass
class RunResult:
    agent: str
    seed: int
    total_reward: float
    mean_reward: float
    regret: float | None
    oracle_total: float | None
    steps: int
    wall_s: float
    decision_ms_median: float
    decision_ms_p95: float
    metrics: dict = field(default_factory=dict)
    instance: int | None = None  # scenario seed of the run (None: a fixed Scenario object or preset)
    value_total: float = 0.0  # evaluated total: Σ expected_reward where reported, else total_reward
    bound_total: float | None = None  # oracle total / episode bound / best static (see module docstring)
    score: float | None = None  # (V − V_random) / (B − V_random), set by evaluate()
    trained_on: bool | None = None  # sb3: models: was this run's instance one the model trained on (None: other agents)
    # per-slot curves (not in results.json; written to curves.csv)
    reward: np.ndarray | None = field(default=None, repr=False)
    cum_regret: np.ndarray | None = field(default=None, repr=False)

    def to_json(self) -> dict:
        d = asdict(self)
        d.pop("reward"), d.pop("cum_regret")
        return d


def aligned_table(head: list[str], rows: list[list], align: tuple[str, ...] | None = None) -> str:
    """A plain-text table whose columns line up whatever the cell widths (agent names with options, long
    learner paths): ``tabulate``'s "simple" format, cells as given (strings are not re-parsed as numbers)."""
    from tabulate import tabulate

    return tabulate(rows, headers=head, tablefmt="simple", colalign=align, disable_numparse=True)


@dataclass
class Results:
    env_id: str
    env_kwargs: dict
    horizon: int
    runs: list[RunResult]
    version: str = ""
    reference_runs: list[RunResult] = field(default_factory=list)  # random runs made only for the score
    instance_axis: str = "scenario_seed"  # or a note saying why the runs share one instance

    @property
    def agents(self) -> list[str]:
        return list(dict.fromkeys(r.agent for r in self.runs))

    @property
    def instances(self) -> list:
        return list(dict.fromkeys(r.instance for r in self.runs))

    def per_instance(self, agent: str, key: str = "total_reward") -> dict:
        """``{instance: mean over that instance's seeds}`` of a run field (e.g. ``total_reward``,
        ``score``, ``regret``) or of a run metric (``metrics[key]``), for one agent."""
        groups: dict = {}
        for r in self.runs:
            if r.agent != agent:
                continue
            v = getattr(r, key) if hasattr(r, key) else r.metrics.get(key)
            if v is not None:
                groups.setdefault(r.instance, []).append(float(v))
        return {i: float(np.mean(v)) for i, v in groups.items()}

    def comparisons(self, reference: str | None = None, key: str = "total_reward") -> list:
        """Every other agent vs ``reference`` (default: the first agent), paired over instances:
        mean relative improvement (%) with a 95% t-interval over instances, wins/losses/ties
        (:func:`clustergym.core.stats.paired_comparison`)."""
        agents = self.agents
        reference = agents[0] if reference is None else reference
        if reference not in agents:
            raise ValueError(f"reference={reference!r} is not among the agents: {', '.join(agents)}")
        ref = self.per_instance(reference, key)
        return [paired_comparison(self.per_instance(a, key), ref, agent=a, reference=reference)
                for a in agents if a != reference]

    def summary(self) -> list[dict]:
        out = []
        for agent in self.agents:
            rs = [r for r in self.runs if r.agent == agent]
            tot = np.array([r.total_reward for r in rs])
            reg = [r.regret for r in rs if r.regret is not None]
            sc = [r.score for r in rs if r.score is not None]
            out.append({
                "agent": agent,
                "mean_total_reward": float(tot.mean()),
                "std_total_reward": float(tot.std(ddof=1)) if len(rs) > 1 else 0.0,
                "mean_regret": float(np.mean(reg)) if reg else None,
                "n": len(rs),
                "n_instances": len({r.instance for r in rs}),
                "mean_score": float(np.mean(sc)) if sc else None,
                "decision_ms_median": float(np.median([r.decision_ms_median for r in rs])),
            })
        return out

    def to_json(self) -> dict:
        return {"env_id": self.env_id, "env_kwargs": self.env_kwargs, "horizon": self.horizon,
                "version": self.version, "instance_axis": self.instance_axis,
                "instances": self.instances, "runs": [r.to_json() for r in self.runs],
                "summary": self.summary(),
                "comparisons": [c.to_json() for c in self.comparisons()] if len(self.agents) > 1 else [],
                "score": SCORE_DEFINITION,
                "reference_runs": [r.to_json() for r in self.reference_runs]}

    def table(self) -> str:
        """A plain-text comparison table (one row per agent).

        "vs best" is each agent's mean relative difference to the agent with the highest mean total
        reward, paired over instances, with its 95% t-interval and the wins/losses over instances.
        """
        rows = self.summary()
        if not rows:
            return ""
        best = max(rows, key=lambda r: r["mean_total_reward"])["agent"]
        comps = {c.agent: c for c in self.comparisons(reference=best)} if len(rows) > 1 else {}
        n_inst = len(self.instances)
        seen = self._trained_on_counts()
        body = []
        for r in sorted(rows, key=lambda r: -r["mean_total_reward"]):
            c = comps.get(r["agent"])
            body.append([r["agent"] + ("*" if r["agent"] in seen else ""),
                         f"{r['mean_total_reward']:.1f} ± {r['std_total_reward']:.1f}",
                         "(best)" if c is None else fmt_ci(c), "" if c is None else f"{c.wins}/{c.losses}",
                         "-" if r["mean_score"] is None else f"{r['mean_score']:.3f}",
                         "-" if r["mean_regret"] is None else f"{r['mean_regret']:.1f}",
                         f"{r['decision_ms_median']:.3f}"])
        head = ["agent", "total reward (mean ± std)", "vs best [95% CI]", "W/L", "score", "regret", "decision ms"]
        lines = [f"* {a}: {k} of {n} runs on instances it was trained on ({', '.join(map(str, inst))}); compare "
                 "learned agents on held-out instances" for a, (k, n, inst) in seen.items()]
        return "\n".join([f"{len(self.runs) // max(len(rows), 1)} runs per agent over {n_inst} instance(s)"
                          f" ({self.instance_axis}); intervals: 95% t over instances",
                          aligned_table(head, body, align=("left", "right", "left", "right", "right", "right",
                                                           "right")), *lines])

    def _trained_on_counts(self) -> dict:
        """agent -> (runs on a training instance, runs, those instances) for agents with such runs."""
        out = {}
        for a in self.agents:
            runs = [r for r in self.runs if r.agent == a]
            hit = [r for r in runs if r.trained_on]
            if hit:
                out[a] = (len(hit), len(runs), sorted({r.instance for r in hit}, key=lambda x: (x is None, x)))
        return out

    def write(self, out_dir: str, plots: bool = True) -> list[str]:
        """Write results.json, curves.csv and (optionally) PNG plots into ``out_dir``; return paths.

        curves.csv is written with the csv module (agent names with commas or brackets are quoted).
        """
        os.makedirs(out_dir, exist_ok=True)
        paths = [os.path.join(out_dir, RESULTS_FILE), os.path.join(out_dir, CURVES_FILE)]
        data, bad = strict_json(self.to_json())
        if bad:  # strict JSON has no NaN/Infinity: written as null, and the fields named
            data["non_finite"] = (f"{len(bad)} value(s) were NaN or infinite and are written as null: "
                                  + ", ".join(bad[:20]) + (" ..." if len(bad) > 20 else ""))
        atomic_write(paths[0], lambda f: json.dump(data, f, indent=1, allow_nan=False))

        def curves(f):
            w = csv.writer(f, lineterminator="\n")
            w.writerow(["agent", "seed", "t", "reward", "cumulative_reward", "cumulative_regret", "instance"])
            for r in self.runs:
                cr = np.cumsum(r.reward)
                reg = r.cum_regret if r.cum_regret is not None else np.full(r.steps, np.nan)
                inst = "" if r.instance is None else r.instance
                for t in range(r.steps):
                    w.writerow([r.agent, r.seed, t + 1, f"{r.reward[t]:.6g}", f"{cr[t]:.6g}",
                                "" if math.isnan(reg[t]) else format(reg[t], ".6g"), inst])

        atomic_write(paths[1], curves)
        if plots:
            paths += plot_results(self, out_dir)
        return paths


SCORE_DEFINITION = ("score = (V - V_random) / (B - V_random) on the same instance and seed; V = sum of "
                    "expected_reward where the env reports it, else total reward; B = per-slot oracle total, "
                    "else episode_bound, else episode_best_static (P2; can be exceeded online); "
                    "V_random = the random agent's V")


def atomic_write(path: str, write, binary: bool = False) -> None:
    """Write through a temporary file renamed into place, so a crash never leaves half a file (``write(f)``
    gets the open file: text, or bytes with ``binary``)."""
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with (open(tmp, "wb") if binary else open(tmp, "w", newline="")) as f:
            write(f)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def check_file_target(path: str, flag: str) -> None:
    """ValueError (one line naming ``flag``) unless ``path`` is a new path or a regular file: a FIFO, a device
    (``/dev/null``), a socket or a folder is never written to nor replaced by a file."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise ValueError(f"{flag} {path!r} cannot be checked: {exc.strerror}") from None
    if not stat.S_ISREG(mode):
        kind = ("a folder" if stat.S_ISDIR(mode) else "a FIFO (named pipe)" if stat.S_ISFIFO(mode)
                else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a regular file")
        raise ValueError(f"{flag} {path!r} is {kind}: give a new path or a regular file (nothing was written)")


def exclusive_write(path: str, write, flag: str) -> None:
    """:func:`atomic_write` for a file the user names (``--save-costs``, ``bench --out``): only a new path or a
    regular file (:func:`check_file_target`), and one writer at a time. The temporary file ``PATH.tmp`` is
    created exclusively (a second writer meanwhile gets a ValueError), and a target that did not exist when
    the write began is created exclusively too: one that appeared meanwhile is left as it is (a ValueError)."""
    check_file_target(path, flag)
    existed = os.path.lexists(path)
    tmp = f"{path}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        raise ValueError(f"{flag} {path!r} is being written by another command ({tmp} exists; remove it if none "
                         "is running)") from None
    try:
        with os.fdopen(fd, "w", newline="") as f:
            write(f)
        check_file_target(path, flag)  # a special file put there meanwhile
        if existed:
            os.replace(tmp, path)
            return
        try:
            os.link(tmp, path)  # atomic, and never replaces a file another writer created meanwhile
        except FileExistsError:
            raise ValueError(f"{flag} {path!r} was created by another command while this one wrote it; it was "
                             "left as it is") from None
        except OSError:  # a file system without hard links: the best check it allows, then the rename
            if os.path.lexists(path):
                raise ValueError(f"{flag} {path!r} was created by another command while this one wrote it; it "
                                 "was left as it is") from None
            os.replace(tmp, path)
    finally:
        if os.path.lexists(tmp):
            os.remove(tmp)


def attach_scores(runs: list[RunResult], reference: list[RunResult]) -> None:
    """Set ``score`` on every run that has a bound, from the random run on the same (instance, seed)."""
    ref = {(r.instance, r.seed): r.value_total for r in reference}
    for r in runs:
        v0 = ref.get((r.instance, r.seed))
        if r.bound_total is None or v0 is None:
            continue
        gap = r.bound_total - v0
        r.score = float((r.value_total - v0) / gap) if gap > 1e-12 * max(1.0, abs(r.bound_total)) else None


def strict_json(obj, where: str = "", bad: list | None = None):
    """``obj`` as plain JSON types (numpy scalars and arrays converted), NaN/±inf replaced by None;
    returns (converted, the dotted paths of the replaced values)."""
    bad = [] if bad is None else bad
    if isinstance(obj, dict):
        return {str(k): strict_json(v, f"{where}.{k}" if where else str(k), bad)[0] for k, v in obj.items()}, bad
    if isinstance(obj, (list, tuple)):
        return [strict_json(v, f"{where}[{i}]", bad)[0] for i, v in enumerate(obj)], bad
    if isinstance(obj, np.ndarray):
        return strict_json(obj.tolist(), where, bad)
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj), bad
    if isinstance(obj, (int, np.integer)):
        return int(obj), bad
    if isinstance(obj, (float, np.floating)):
        v = float(obj)
        if not math.isfinite(v):
            bad.append(where)
            return None, bad
        return v, bad
    if obj is None or isinstance(obj, str):
        return obj, bad
    return _json_default(obj), bad


def _json_default(o):
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    return str(o)


def write_json(path: str, doc: dict, **dump_kwargs) -> str:
    """Write ``doc`` to ``path`` (e.g. ``FOLDER/results.json`` of an experiment) through a temporary file,
    with ``json.dump(doc, f, **dump_kwargs)``; returns ``path``."""
    atomic_write(path, lambda f: json.dump(doc, f, **dump_kwargs))
    return path
