"""One module per paper: ``reproduce(quick, out, workers, progress, instances=None, tiny=False) -> report
path`` and
``bench_rows(quick) -> list[bench.Row]``. Modules are discovered by name, so a new paper adds one
file here and nothing else (``clustergym reproduce NAME`` and ``clustergym bench`` pick it up).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import io
import json
import math
import os
import platform
import re
import tempfile
import time

from clustergym.envs import FAMILIES as _FAMILIES
from clustergym.runner.results import RESULTS_FILE, exclusive_write, write_json
from clustergym.runner.workers import worker_pool
from clustergym.runner.runstore import RunStore, config_key, use_store
from clustergym.runner.ray_backend import ray_tasks
from clustergym.core.eta import describe_duration
from clustergym.core.stats import claims_rows_json
from clustergym.core.version import __version__

__all__ = ["KNOWN", "MIN_INSTANCES", "QUICK_INSTANCES", "FULL_INSTANCES", "instances_for", "describe_instances", "mode_name", "write_summary",
           "list_papers", "load", "plan", "plan_table", "plan_estimate", "SHIPPED_COSTS", "reproduce", "write_combined_report", "STORE_DIR"]

STORE_DIR = "store"  # the run store inside a reproduction's --out (clustergym.runner.runstore)

# Instances (scenario seeds) of every claims comparison (docs/evaluation.md "How many instances"):
# five instances sit at the edge of what a 95% interval resolves (verdicts changed on five fresh
# instances), so quick mode compares over 10 and full mode over 20; quick mode shortens horizons.
QUICK_INSTANCES = 10
FULL_INSTANCES = 20
MIN_INSTANCES = QUICK_INSTANCES  # the fewest instances any mode uses by default


def instances_for(quick: bool, instances=None) -> list[int]:
    """The instances (scenario seeds) a paper's reproduction compares agents over: ``instances`` when
    given (``clustergym reproduce --instances A-B``), else 0..QUICK_INSTANCES−1 in quick mode and
    0..FULL_INSTANCES−1 in full mode (the one place that sets the numbers)."""
    if instances is None:
        return list(range(QUICK_INSTANCES if quick else FULL_INSTANCES))
    out = [int(i) for i in instances]
    if not out or any(i < 0 for i in out) or len(set(out)) != len(out):
        raise ValueError(f"instances={list(instances)!r} is invalid: expected distinct integers >= 0")
    return out


def mode_name(quick: bool, tiny: bool = False) -> str:
    """The mode a report's title names."""
    return "tiny test" if tiny else ("quick" if quick else "full")  # tiny: a few slots, the numbers mean nothing


def write_summary(folder: str, env_id: str, instances, quick: bool, tiny: bool, rows, **extra) -> str:
    """``FOLDER/results.json`` of a paper whose runs span several configurations: the instances, the
    mode and every claims row with its verdict (a comparison as ``Comparison.to_json``, per instance)."""
    doc = {"env_id": env_id, "instances": [int(i) for i in instances], "mode": mode_name(quick, tiny), **extra,
           "claims": claims_rows_json(rows)}
    return write_json(os.path.join(folder, RESULTS_FILE), doc, indent=1, default=str)


def describe_instances(instances) -> str:
    """``"20–29"`` for a run of consecutive instances, else the comma-separated list."""
    xs = [int(i) for i in instances]
    if len(xs) > 2 and xs == list(range(xs[0], xs[0] + len(xs))):
        return f"{xs[0]}–{xs[-1]}"
    return ", ".join(map(str, xs))


# The ``experiment`` of every shipped family, in the order the papers appear in the README (P1..P4).
KNOWN = tuple(f.experiment for f in _FAMILIES if f.experiment)


def list_papers() -> list[str]:
    """Papers whose experiment module is present."""
    return [n for n in KNOWN if importlib.util.find_spec(f"{__name__}.{n}") is not None]


def load(name: str):
    if name not in list_papers():
        raise ValueError(f"unknown paper {name!r}; expected one of {', '.join([*list_papers(), 'all'])}")
    return importlib.import_module(f"{__name__}.{name}")


def reproduce(paper: str, quick: bool = False, out: str = "runs/reproduce", workers: int = 2,
              progress: bool = True, instances=None, tiny: bool = False, backend: str = "local",
              store: str | None = None, runner=None) -> list[str]:
    """Run one paper's comparison (or ``"all"``); returns the report paths.

    Each paper writes its own ``OUT/<paper>/report.md`` (tables, figures) and ``results.json``. With
    ``"all"``, a combined ``OUT/report.md`` follows them: one section per paper (its report, figure
    links rewritten to point into the paper's folder) and the wall time of each part.
    ``instances``: the scenario seeds every experiment of every paper compares over (default
    :func:`instances_for`). ``tiny``: for tests of the machinery only — horizons of a few slots, so
    the numbers mean nothing; the reports say so. ``backend="ray"``: every sweep's runs are Ray tasks
    (:func:`clustergym.runner.ray_backend.ray_tasks`: a cluster through ``$RAY_ADDRESS``, else a local Ray instance with
    ``workers`` CPUs); the results are the local backend's. ``store``: a run store folder
    (:mod:`clustergym.runner.runstore`): every finished run is written there as it ends and reused by the next call, so
    an interrupted reproduction continues where it stopped, with the same results.
    ``runner(name, out, workers, progress, instances) -> report path`` replaces the paper modules' ``reproduce``
    (e.g. one experiment alone, :func:`clustergym.experiments.single.runner`).
    """
    if backend not in ("local", "ray"):
        raise ValueError(f"backend={backend!r} is invalid: expected local or ray")
    names = list_papers() if paper == "all" else [paper]
    for n in names:  # validate every name before running anything
        load(n)
    run = runner or _whole(quick, tiny)
    insts = instances_for(quick, instances)

    reports, walls = [], []
    if backend == "ray":
        workers = max(2, workers)  # a sweep with one worker runs in this process
    pool = ray_tasks(workers) if backend == "ray" else worker_pool(workers)
    rs = None if store is None else RunStore(store)
    with pool, use_store(rs):  # one set of worker processes (or one Ray session) for every sweep of every paper
        for n in names:
            t0 = time.perf_counter()
            if rs is not None:
                rs.label = n
            reports.append(run(n, out, workers, progress, insts))
            walls.append(time.perf_counter() - t0)
    if rs is not None:
        print(f"run store {store}: {rs.reused} run(s) reused, {rs.ran} run(s) computed and stored")
    if paper == "all":
        reports.append(write_combined_report(out, names, reports, walls, quick, workers, insts))
    return reports


def _whole(quick: bool, tiny: bool):
    """The runner of a paper's whole reproduction: its module's ``reproduce``."""
    return lambda n, out, workers, progress, insts: load(n).reproduce(quick, out, workers, progress, instances=insts,
                                                                     tiny=tiny)


def write_combined_report(out: str, names: list[str], reports: list[str], walls: list[float], quick: bool,
                          workers: int, instances=None) -> str:
    """``OUT/report.md``: every paper's report in one page, with per-paper wall times."""
    total = sum(walls)
    lines = [f"# clustergym reproduction report ({'quick' if quick else 'full'} mode)", "",
             f"clustergym {__version__}, {platform.machine()} with {os.cpu_count()} cores, "
             f"{workers} worker processes; total wall time {total / 60:.1f} min."
             + (f" Instances (scenario seeds) of every comparison: {describe_instances(instances)} "
                f"({len(instances)})." if instances is not None else ""), "",
             "| paper | report | wall time |", "|---|---|---|"]
    for n, r, w in zip(names, reports, walls):
        lines.append(f"| {n} | [{n}/report.md]({os.path.relpath(r, out)}) | {w:.0f} s |")
    lines.append("")
    for n, r in zip(names, reports):
        with open(r) as f:
            body = f.read()
        rel = os.path.relpath(os.path.dirname(r), out)
        # Figure and file links are relative to the paper's folder: point them into it.
        body = re.sub(r"(!?\[[^\]]*\]\()(?![a-z]+://|/|#)([^)]+\))", lambda mm: f"{mm.group(1)}{rel}/{mm.group(2)}",
                      body)
        body = re.sub(r"^(#+) ", lambda mm: "#" + mm.group(1) + " ", body, flags=re.M)  # one level down
        lines += [body.rstrip(), ""]
    path = os.path.join(out, "report.md")
    with open(path, "w") as f:
        f.write("\n".join(lines))
    print(f"combined report: {path} (total {total / 60:.1f} min)")
    return path


def read_costs(path: str) -> dict[str, tuple[float, int]]:
    """The unit costs of a run store (a folder, ``OUT/store``) or of a costs file :func:`write_costs` wrote (JSON:
    ``{"unit_costs": {configuration: [CPU seconds per slot, longest measured horizon]}}``); a ValueError (one
    line) for anything else."""
    if os.path.isdir(path):
        costs = RunStore(path).unit_cost_records()
        if not costs:  # e.g. a reproduction's --out given instead of its OUT/store
            inner = os.path.join(path, STORE_DIR)
            hint = f" (its run store is {inner!r})" if os.path.isdir(inner) else ""
            raise ValueError(f"--costs-from {path!r} holds no measured runs: not a run store, or an empty one{hint}")
        return {k: _checked_cost(path, k, c, h) for k, (c, h) in costs.items()}
    try:
        with open(path) as f:
            doc = json.load(f)
        items = [(str(k), float(c), h) for k, (c, h) in doc["unit_costs"].items()]
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"--costs-from {path!r} is neither a run store (OUT/store) nor a costs file written by "
                         f"--save-costs ({type(exc).__name__})") from None
    return {k: _checked_cost(path, k, c, h) for k, c, h in items}


# The largest unit cost (CPU seconds per slot) and measured horizon a costs file may hold: beyond, a typo
# or a damaged file, whose estimate would overflow or mean nothing.
MAX_UNIT_COST, MAX_COST_HORIZON = 1e6, 10**12


def _checked_cost(path: str, key: str, cost: float, horizon) -> tuple[float, int]:
    """One unit cost of ``--costs-from``: CPU seconds per slot in [0, MAX_UNIT_COST] and a whole horizon in
    [1, MAX_COST_HORIZON] (a ValueError naming the file and the configuration otherwise)."""
    ok_h = isinstance(horizon, int) or (isinstance(horizon, float) and horizon.is_integer())
    if (not (math.isfinite(cost) and 0.0 <= cost <= MAX_UNIT_COST) or isinstance(horizon, bool) or not ok_h
            or not 1 <= horizon <= MAX_COST_HORIZON):
        raise ValueError(f"--costs-from {path!r}: the unit cost of {key[:60]!r} is [{cost!r}, {horizon!r}]; expected "
                         f"[CPU seconds per slot in [0, {MAX_UNIT_COST:g}], longest measured horizon, a whole "
                         f"number in [1, {MAX_COST_HORIZON:.0e}]]")
    return cost, int(horizon)


def write_costs(path: str, costs: dict[str, tuple[float, int]]) -> None:
    """A costs file: every configuration's unit cost (CPU seconds per slot) and longest measured horizon, small
    enough to commit, so a plan on another machine can estimate from this one's measurements."""
    doc = {"unit_costs": {k: [float(c), int(h)] for k, (c, h) in sorted(costs.items())}}
    exclusive_write(path, lambda f: json.dump(doc, f, indent=0, sort_keys=True), "--save-costs")


def plan(paper: str, quick: bool = False, store: str = "runs/reproduce/store", instances=None,
         tiny: bool = False, cost_stores: tuple[str, ...] = (), save_costs: str | None = None,
         runner=None) -> dict:
    """What ``reproduce(paper, quick)`` would run, without running it: every run of every experiment, how many
    the run store already holds, and an estimate of the CPU time of the missing ones from the unit costs (CPU
    seconds per slot of the same agent and configuration) measured on the runs the store holds, then on those of
    ``cost_stores`` (stores or costs files, :func:`read_costs`); ``save_costs``: write the costs used there;
    ``runner``: what runs in place of the paper modules' ``reproduce`` (as :func:`reproduce`).

    The reproduction's code runs with a store in plan mode (:class:`clustergym.runner.runstore.RunStore`): finished runs
    are read, missing ones are listed and stand-in values take their place, so the experiments' own code decides
    what runs (no second list to keep in step). The diagnostics computed outside the worker pool (exact-mean
    regret limits, shares given the true means) run for real, as they would in the reproduction.
    Returns ``{"papers": {name: {"rows": [...], "error": str | None}}, "unmeasured": int}``.
    """
    names = list_papers() if paper == "all" else [paper]
    for n in names:  # validate every name before running anything
        load(n)
    run = runner or _whole(quick, tiny)
    insts = instances_for(quick, instances)
    rs = RunStore(store, plan=True)
    costs = RunStore(store).unit_cost_records()
    for extra in cost_stores:  # unit costs measured elsewhere (another machine's store, an earlier mode's, a file)
        for k, v in read_costs(extra).items():
            costs.setdefault(k, v)
    if save_costs:
        write_costs(save_costs, costs)
    errors: dict[str, str | None] = {}
    with tempfile.TemporaryDirectory() as tmp, use_store(rs):
        for n in names:
            rs.label = n
            try:
                with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                    run(n, tmp, 1, False, insts)
                errors[n] = None
            except Exception as exc:  # the stand-ins can upset an analysis: the runs listed so far still count
                errors[n] = f"{type(exc).__name__}: {exc}"
    return _plan_rows(names, rs, costs, errors)


def _plan_rows(names, rs, costs: dict, errors: dict) -> dict:
    """Per paper, one row per configuration (env, agent set, kwargs, horizon): runs, stored, missing, CPU hours."""
    by_agent: dict[tuple, list[tuple[float, int]]] = {}
    for k, c in costs.items():
        agent, env_id, _ = json.loads(k)
        by_agent.setdefault((agent, env_id), []).append(c)
    out: dict = {"papers": {}, "unmeasured": 0}
    seen: set = set()
    for n in names:
        rows: dict[tuple, dict] = {}
        for kind, entries in (("stored", rs.found), ("missing", rs.planned)):
            for label, info, key in entries:
                if label != n or info is None or key in seen:
                    continue
                seen.add(key)  # a run shared by two experiments is run (and counted) once
                cfg = {k: v for k, v in info.config.items() if k != "oracle"}
                rk = (info.env_id.split("/")[-1], info.horizon, repr(sorted(cfg.items())))
                row = rows.setdefault(rk, {"env": rk[0], "horizon": info.horizon, "config": cfg, "agents": set(),
                                           "runs": 0, "stored": 0, "cpu_s": 0.0, "estimated": True, "basis": set()})
                row["agents"].add(info.agent)
                row["runs"] += 1
                if kind == "stored":
                    row["stored"] += 1
                    continue
                c = costs.get(config_key(info))
                if c is None:  # not measured at this configuration: the agent's dearest measured one in this env
                    near = by_agent.get((info.agent, info.env_id))
                    if not near:
                        out["unmeasured"] += 1
                        row["estimated"] = False
                        continue
                    c = max(near)
                    row["basis"].add("other configuration")
                row["basis"].add("same horizon" if c[1] >= info.horizon else f"runs of {c[1]:,} slots")
                row["cpu_s"] += c[0] * info.horizon
        out["papers"][n] = {"rows": list(rows.values()), "error": errors.get(n)}
    return out


def plan_table(p: dict) -> str:
    """The markdown of a :func:`plan`: one table per paper and the totals."""
    lines: list[str] = []
    total_runs = total_stored = 0
    total_cpu = 0.0
    for n, d in p["papers"].items():
        rows = d["rows"]
        runs, stored, cpu = sum(r["runs"] for r in rows), sum(r["stored"] for r in rows), sum(r["cpu_s"] for r in rows)
        total_runs, total_stored, total_cpu = total_runs + runs, total_stored + stored, total_cpu + cpu
        lines += [f"**{n}**: {runs:,} runs, {stored:,} stored, {runs - stored:,} to run, about "
                  f"{cpu / 3600:.2f} CPU-hours" + (f" (the plan stopped early: {d['error']})" if d["error"] else ""), "",
                  "| env | horizon | configuration | agents | runs | stored | CPU-hours left | unit costs from |",
                  "|---|---|---|---|---|---|---|---|"]
        if d.get("experiments"):  # set by the caller (the command line: the experiments --only runs alone)
            lines[-2:-2] = [f"Experiments that run alone (`--only NAME`): {', '.join(d['experiments'])}.", ""]
        for r in sorted(rows, key=lambda r: -r["cpu_s"]):
            cfg = ", ".join(f"{k}={v}" for k, v in sorted(r["config"].items())) or "defaults"
            est = f"{r['cpu_s'] / 3600:.3f}" + ("" if r["estimated"] else " (some unmeasured)")
            basis = ", ".join(sorted(r["basis"])) or ("–" if r["runs"] == r["stored"] else "unmeasured")
            lines.append(f"| {r['env']} | {r['horizon']:,} | {cfg} | {len(r['agents'])} | {r['runs']} | {r['stored']} | "
                         f"{est} | {basis} |")
        lines.append("")
    lines.append(f"**Total**: {total_runs:,} runs, {total_stored:,} stored, {total_runs - total_stored:,} to run, about "
                 f"{total_cpu / 3600:.2f} CPU-hours left ({total_cpu / 3600 / max(os.cpu_count() or 1, 1):.2f} h "
                 f"on {os.cpu_count()} cores)" + (f"; {p['unmeasured']} run(s) of configurations with no measured "
                                                  "unit cost are not counted" if p["unmeasured"] else "") + ".")
    return "\n".join(lines)


# The unit costs the project measured for full mode (a clone's docs/data; absent from an installed package).
SHIPPED_COSTS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                             "docs", "data", "full", "unit_costs.json")


def plan_estimate(p: dict, workers: int) -> str:
    """The one line a full reproduction prints before it starts: the runs left and their CPU time from a
    :func:`plan`, and the wall time on ``workers`` worker processes (CPU time / workers, the cores allowing)."""
    rows = [r for d in p["papers"].values() for r in d["rows"]]
    runs, stored = sum(r["runs"] for r in rows), sum(r["stored"] for r in rows)
    cpu = sum(r["cpu_s"] for r in rows)
    par = max(1, min(int(workers), os.cpu_count() or 1))
    line = (f"expected: {runs - stored:,} of {runs:,} runs to run ({stored:,} stored), about {cpu / 3600:.2f} "
            f"CPU-hours, {describe_duration(cpu / par)} on {par} worker(s)")
    if p["unmeasured"]:
        line += f"; {p['unmeasured']:,} run(s) with no measured unit cost not counted"
    return line + " (clustergym reproduce --plan lists them)"
