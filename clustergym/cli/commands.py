"""What each ``clustergym`` command does: ``cmd_<command>(args) -> exit code``, and the checks of the
command-line values they share (``--set``, ``--seeds``, ``--out``, ``--agents``).

The parser and the entry point are in :mod:`clustergym.cli.main`; a value the user got wrong is a
:class:`UsageError` (one line on stderr, exit code 2).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import shutil
import sys

from clustergym import experiments
from clustergym.cli import bench
from clustergym.runner import evaluation
from clustergym.core.agent import list_agents
from clustergym.core.scenario import check_memory, json_depth
from clustergym.runner.episode import make_env
from clustergym.experiments import alone, drl, drl_export, drl_plan, list_papers
from clustergym.core.family import env_family, env_ids
from clustergym.learning import training
from clustergym.learning.hyperparams import default_algo
from clustergym.learning.importing import import_model
from clustergym.learning.instances import describe_pool
from clustergym.learning.tuning import VALIDATION, TuneConfig, default_runs, instance_is_seed, study_name_of, tune
from clustergym.core.outdir import FolderLock, OutputFolder, check_path
from clustergym.runner.replay import replay
from clustergym.runner.results import RUN_FILES, check_file_target

__all__ = ["UsageError", "int_list", "cmd_list", "cmd_run", "cmd_reproduce", "cmd_train", "cmd_tune", "cmd_drl", "cmd_import_model",
           "cmd_replay", "cmd_bench"]


class UsageError(ValueError):
    """Bad input from the command line."""



# The deepest nesting of lists/objects a --set value may have (JSON's parser recurses once per level).
MAX_SET_DEPTH = 32


def _parse_set(items: list[str]) -> dict:
    """``--set key=value``: values parsed as JSON when they parse, else kept as strings."""
    out = {}
    for item in items or []:
        key, eq, val = item.partition("=")
        key = key.strip()
        if not eq or not key or not key.replace("_", "").isalnum():
            raise UsageError(f"malformed --set {item[:80]!r}: expected key=value (e.g. --set rho=0.7)")
        if json_depth(val) > MAX_SET_DEPTH:
            raise UsageError(f"--set {key}=... nests lists/objects {json_depth(val):,} deep; at most {MAX_SET_DEPTH}")
        try:
            out[key] = json.loads(val)
        except json.JSONDecodeError:
            out[key] = val
    return out


def int_list(text: str) -> list[int]:
    """argparse ``type=`` for a list of integers in the ``--seeds`` syntax (``0-4``, ``0,2,5``): a bad value is
    argparse's one-line usage error (the benchmarks' ``--instances`` and ``--seeds``)."""
    try:
        return _parse_seeds(text, "list")
    except UsageError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _parse_seeds(text: str, flag: str = "--seeds") -> list[int]:
    seeds = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        if "-" in part[1:]:
            lo, _, hi = part.partition("-")
            try:
                lo, hi = int(lo), int(hi)
            except ValueError:
                raise UsageError(f"malformed {flag} {text!r}: expected e.g. 0,1,2 or 0-4") from None
            if hi < lo:
                raise UsageError(f"malformed {flag} {text!r}: the range {part} is empty (expected lo-hi, lo <= hi)")
            if hi - lo + 1 > MAX_SEEDS:
                raise UsageError(f"{flag} {text!r} names {hi - lo + 1:,} values; at most {MAX_SEEDS:,} per command")
            seeds.extend(range(lo, hi + 1))
        else:
            try:
                seeds.append(int(part))
            except ValueError:
                raise UsageError(f"malformed {flag} {text!r}: expected e.g. 0,1,2 or 0-4") from None
    if not seeds:
        raise UsageError(f"{flag} is empty")
    if len(seeds) > MAX_SEEDS:
        raise UsageError(f"{flag} names {len(seeds):,} values; at most {MAX_SEEDS:,} per command")
    if min(seeds) < 0:
        raise UsageError(f"{flag} {text!r} is invalid: expected integers >= 0")
    return seeds


def _check_out(path: str, *, is_file: bool = False) -> None:
    """Check an output location before any work starts (a long run must not die at the end on a bad --out).

    A folder (``is_file=False``): :func:`clustergym.core.outdir.check_path` (resolvable, names the file system
    takes, writable). A file must not be a folder, and its folder must pass the same checks.
    """
    import os

    if not is_file:
        check_path(path)
        return
    if not path:
        raise UsageError("--out is empty")
    if os.path.isdir(path):
        raise UsageError(f"--out {path!r} is a folder; expected a file path")
    check_path(os.path.dirname(os.path.abspath(path)), "--out's folder")


# The most seeds (or instances) one command takes: each is at least one episode per agent, and the
# runner keeps the per-slot curves of every run in memory (a typo such as 0-100000000 would otherwise
# run for days or end in a MemoryError).
MAX_SEEDS = 100_000


def _split_agents(text: str) -> list[str]:
    """Split ``a,b[x=1,y=2],c`` on commas outside brackets."""
    out, depth, cur = [], 0, ""
    for ch in text:
        depth += ch == "["
        depth -= ch == "]"
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    out.append(cur.strip())
    return [a for a in out if a]


def cmd_list(args) -> int:
    for env_id in env_ids():
        print(f"{env_id}\n    agents: {', '.join(list_agents(env_id))}")
    return 0


def _run_sizes(n_runs: int, horizon: int, plots: bool) -> tuple[float, float]:
    """(all bytes, largest file) a run writes: curves.csv ~60 B per slot of every run, results.json ~4 kB
    per run, two PNG plots of up to ~300 kB each (free-space and ``ulimit -f`` checks before the work)."""
    curves, results = 60.0 * n_runs * horizon, 4000.0 * n_runs + 20_000
    png = 300_000.0 if plots else 0.0
    return curves + results + 2 * png, max(curves, results, png)


def _env_horizon(env_id: str, env_kwargs: dict) -> int:
    """The episode length ``env_id`` has with ``env_kwargs`` (its ``horizon``), read from one env built for it."""
    env_family(env_id)  # an unknown id: the error that names the known ones
    env = make_env(env_id, **env_kwargs)
    try:
        return int(env.unwrapped.horizon)
    finally:
        env.close()


def cmd_run(args) -> int:
    agents = _split_agents(args.agents)
    if not agents:
        raise UsageError("--agents is empty")
    _check_out(args.out)
    env_kwargs = _parse_set(args.set)
    if "horizon" in env_kwargs:
        raise UsageError("set the episode length with --horizon, not --set horizon=...")
    if env_kwargs.get("render_mode") is not None:
        raise UsageError("--set render_mode is not for runs (the runner does not render); render with "
                         "gym.make(..., render_mode='ansi' or 'rgb_array')")
    seeds = _parse_seeds(args.seeds)
    instances = None if args.instances is None else _parse_seeds(args.instances, "--instances")
    n_runs = len(seeds) * (1 if instances is None else len(instances))
    if n_runs > MAX_SEEDS:
        raise UsageError(f"--instances x --seeds is {n_runs:,} runs per agent; at most {MAX_SEEDS:,} per command")
    horizon = args.horizon if args.horizon is not None else _env_horizon(args.env_id, env_kwargs)
    if horizon > 0:  # the runner keeps 2 float64 curves per slot of every run: refused before the disk check
        check_memory(16.0 * horizon * n_runs * len(agents), f"--horizon {horizon}",
                     f"the per-slot curves of {n_runs * len(agents):,} runs")
    total, largest = _run_sizes(n_runs * (len(agents) + 1), max(int(horizon), 1), not args.no_plots)
    with OutputFolder(args.out, overwrite=args.overwrite, marks=RUN_FILES, need_total=total,
                      need_file=largest) as stage:
        res = evaluation.evaluate(args.env_id, agents, seeds, horizon, env_kwargs=env_kwargs,  # looked up per call
                                  workers=args.workers, backend=args.backend, progress=not args.no_progress,
                                  instances=instances, score=not args.no_score)
        print(res.table())
        res.write(stage.path, plots=not args.no_plots)
    print("wrote " + ", ".join(os.path.join(args.out, n) for n in stage.written))
    return 0


REPRODUCE_FILES = ("report.md",)


class _PrintAs:
    """stdout that shows the staging folder's path as the --out it will become (the papers print "wrote ...")."""

    def __init__(self, stream, old: str, new: str):
        self._stream, self._old, self._new = stream, old, new

    def write(self, text):
        return self._stream.write(text.replace(self._old, self._new))

    def __getattr__(self, name):
        return getattr(self._stream, name)


def _print_as(old: str, new: str):
    import contextlib

    return contextlib.redirect_stdout(_PrintAs(sys.stdout, old, new))


def cmd_reproduce(args) -> int:
    _check_out(args.out)
    if args.workers < 1:
        raise UsageError(f"--workers {args.workers} is invalid: expected an integer >= 1")
    if args.paper != "all" and args.paper not in list_papers():
        raise UsageError(f"unknown paper {args.paper!r}; expected one of {', '.join([*list_papers(), 'all'])}")
    names = list_papers() if args.paper == "all" else [args.paper]
    instances = None if args.instances is None else _parse_seeds(args.instances, "--instances")
    if instances is not None and len(set(instances)) != len(instances):
        raise UsageError(f"--instances {args.instances} is invalid: an instance is listed twice")
    store = os.path.join(args.out, experiments.STORE_DIR)
    kw = {"instances": instances} if instances is not None else {}
    if args.tiny:
        kw["tiny"] = True
    if args.only is not None:
        try:
            alone.check_only(args.paper, args.only, args.quick, args.tiny)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        # loaded on use, as the paper modules are (experiments.load): they are not needed for the other commands
        single = importlib.import_module("clustergym.experiments.single")
        kw["runner"] = single.runner(args.paper, args.only, args.quick, args.tiny)
    if args.plan:
        if args.fresh:
            raise UsageError("--plan and --fresh cannot be combined: a plan runs nothing and keeps the store")
        extra = tuple(x for x in (args.costs_from or "").split(",") if x)
        for x in extra:  # a costs file is checked here; a store is read once, by the plan
            try:
                if not os.path.isdir(x):
                    experiments.read_costs(x)
            except ValueError as exc:
                raise UsageError(str(exc)) from None
        if not (args.quick or args.tiny) and os.path.isfile(experiments.SHIPPED_COSTS):
            extra += (experiments.SHIPPED_COSTS,)  # the full run's own estimate uses them too: the same hours
        if args.save_costs:
            parent = os.path.dirname(os.path.abspath(args.save_costs))
            if os.path.isdir(args.save_costs) or not os.path.isdir(parent) or not os.access(parent, os.W_OK):
                raise UsageError(f"--save-costs {args.save_costs!r} is not a file this user can write (its folder "
                                 "must exist)")
            check_file_target(args.save_costs, "--save-costs")  # before the plan: never a FIFO or a device
        p = experiments.plan(args.paper, quick=args.quick, store=store, cost_stores=extra, save_costs=args.save_costs,
                             **kw)
        for n, d in p["papers"].items():
            d["experiments"] = alone.experiment_names(n)
        print(experiments.plan_table(p))
        if args.save_costs:
            print(f"wrote the unit costs to {args.save_costs}")
        return 0
    if args.costs_from or args.save_costs:
        raise UsageError(f"{'--costs-from' if args.costs_from else '--save-costs'} goes with --plan")
    with OutputFolder(args.out, overwrite=args.overwrite, marks=(*REPRODUCE_FILES, *names),
                      need_total=50e6, need_file=2e6) as stage, _print_as(stage.path, args.out.rstrip("/")):
        if args.fresh and os.path.isdir(store):
            shutil.rmtree(store)
        if not args.quick:  # the long mode: its plan first (the store's unit costs, then the project's measured ones)
            print("estimating the time of the runs (the plan of --plan) ...", flush=True)
            costs = tuple(c for c in (experiments.SHIPPED_COSTS,) if os.path.isfile(c))
            planned = experiments.plan(args.paper, quick=False, store=store, cost_stores=costs, **kw)
            print(experiments.plan_estimate(planned, args.workers), flush=True)
        experiments.reproduce(args.paper, quick=args.quick, out=stage.path, workers=args.workers,
                              progress=not args.no_progress, backend=args.backend, store=store, **kw)
    print(f"wrote {', '.join(stage.written)} in {args.out}")
    return 0


def cmd_train(args) -> int:
    if args.algo is None:
        args.algo = default_algo(args.env_id)
    if args.out is None:
        args.out = os.path.join("runs", "train", f"{args.env_id.split('/')[-1]}-{args.algo}-s{args.seed}")
    _check_out(args.out)
    env_kwargs = _parse_set(args.set)
    if args.horizon is not None:
        env_kwargs["horizon"] = args.horizon
    hp = _parse_set(args.hp)
    instances = None if args.instances is None else _parse_seeds(args.instances, "--instances")
    _check_warm_flags(args)
    warm = {k: v for k, v in (("bc_steps", args.bc_steps), ("bc_epochs", args.bc_epochs)) if v is not None}
    config = training.TrainConfig(
        args.env_id, args.algo, args.timesteps, env_kwargs=env_kwargs, instances=instances,
        param_draws=args.param_draws, seed=args.seed, hyperparams=hp, hyperparams_file=args.hp_file,
        head=args.action_head, net=args.net, n_envs=args.n_envs, vec=args.vec, stats=not args.no_stats,
        normalize=False if args.no_normalize else None, warm_start=args.warm_start, **warm,
        eval_freq=args.eval_freq, eval_episodes=args.eval_episodes, privileged=args.privileged, shaping=args.shaping)
    training.check(config)  # every bad value before any folder or log line
    # Trained into a staging folder inside --out; the earlier run is replaced only when this one finished.
    with OutputFolder(args.out, overwrite=args.overwrite, marks=TRAIN_FILES, need_total=20e6,
                      need_file=5e6) as stage:
        # the logs are written as training goes (into the staging folder): watchable before it ends
        print(f"TensorBoard logs, live: tensorboard --logdir {os.path.join(stage.path, 'tb')} (moved to "
              f"{os.path.join(args.out.rstrip('/'), 'tb')} when training ends)", flush=True)
        meta = training.train(config, stage.path, progress=not args.no_progress, verbose=args.verbose,
                              estimate=lambda line: print(line, flush=True))
    model = f"{args.out.rstrip('/')}/model.zip"
    done = meta.get("timesteps_trained", meta["timesteps"])
    note = "" if done == meta["timesteps"] else (f" (asked {meta['timesteps']:,}; {meta['algo']} trains whole "
                                                 "rollouts of n_steps x n_envs)")
    ws = meta.get("warm_start")
    if ws:
        fit = (f"accuracy per dimension {ws['accuracy_per_dim']:.3f}" if "accuracy_per_dim" in ws
               else f"mean squared error {ws['mse_deterministic']:.4f}")
        print(f"behaviour cloning from {ws['teacher']}: {ws['demo_steps']:,} demonstration steps, {ws['epochs']} "
              f"epochs, {fit} on the demonstrations, {ws['bc_wall_s']:.0f} s")
    print(f"trained {meta['algo']} on {meta['env_id']} for {done:,} steps{note} in {meta['train_wall_s']:.0f} s")
    out = args.out.rstrip("/")
    wrote = [n for n in ("model.zip", "vecnormalize.npz", "clustergym.json", "training_curve.png", "evaluations.npz")
             if os.path.exists(os.path.join(out, n))]
    if os.path.isdir(os.path.join(out, "tb")):
        wrote.append("TensorBoard logs (tb/)")
    print(f"wrote {', '.join(wrote)} in {out}")
    if meta.get("instances"):
        print(f"trained on instances {describe_pool(meta['instances'])}; evaluate on others: clustergym run "
              f"{meta['env_id']} --agents sb3:{model},random --instances {_held_out(meta['instances'])} --seeds 0 "
              "--out runs/eval")
    else:
        inst = meta.get("env_kwargs", {}).get("scenario_seed", 0)
        print(f"evaluate: clustergym run {meta['env_id']} --agents sb3:{model} --seeds 100-102 --out runs/eval "
              f"(instance {inst}, the one it was trained on)")
    return 0


def _check_warm_flags(args) -> None:
    if args.warm_start is None:
        given = [f for f, v in (("--bc-steps", args.bc_steps), ("--bc-epochs", args.bc_epochs)) if v is not None]
        if given:
            raise UsageError(f"{given[0]} sets the behaviour cloning of --warm-start AGENT, which is not given")


def _held_out(pool) -> str:
    """Five instances outside the training pool, as --instances text (0-4 unless the pool covers some)."""
    taken, free, k = set(int(i) for i in pool), [], 0
    while len(free) < 5:
        if k not in taken:
            free.append(k)
        k += 1
    return f"{free[0]}-{free[-1]}" if free[-1] - free[0] == 4 else ",".join(map(str, free))


TRAIN_FILES = ("model.zip", "clustergym.json", "vecnormalize.npz", "vecnormalize.pkl", "evaluations.npz", "training_curve.png",
               "monitor", "tb")


def cmd_tune(args) -> int:
    if args.algo is None:
        args.algo = default_algo(args.env_id)
    instances, seeds = default_runs(args.env_id)
    if args.instances is not None:
        instances = None if args.instances == "seed" else tuple(_parse_seeds(args.instances, "--instances"))
        if instances is not None and instance_is_seed(args.env_id) and args.seeds is None:
            seeds = (0,)
    if args.seeds is not None:
        seeds = tuple(_parse_seeds(args.seeds, "--seeds"))
    elif instances is None:
        seeds = VALIDATION
    cfg = TuneConfig(args.env_id, args.algo, timesteps=args.timesteps, trials=args.trials, instances=instances,
                     seeds=seeds, horizon=args.horizon,
                     reference=args.reference, seed=args.seed, n_envs=args.n_envs,
                     env_kwargs=tuple(sorted(_parse_set(args.set).items())), net=args.net,
                     train_seeds=args.train_seeds)
    out = args.out or os.path.join("runs", "tune", args.study or study_name_of(cfg))
    _check_out(out)
    rec = tune(cfg, out, storage=args.storage, study_name=args.study, progress=not args.no_progress)
    best = rec["best"]
    done = sum(t["state"] == "COMPLETE" for t in rec["trials"])
    print(f"{done} trials of study {rec['study']} in {out}/tuning.json (objective: 1 = {rec['reference']}, "
          "0 = random, on the validation instances)")
    if best is not None:
        print(f"best: trial {best['number']}, {best['value']:+.3f}: "
              + ", ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in best["params"].items()))
    return 0


def cmd_drl(args) -> int:
    out = args.out if args.out is not None else (drl_plan.QUICK["out"] if args.quick else drl_plan.FULL_OUT)
    _check_out(out)
    envs = None if args.envs is None else [e.strip().lower() for e in args.envs.split(",") if e.strip()]
    for e in envs or ():
        if e not in drl_plan.PLAN:
            raise UsageError(f"--envs {args.envs!r}: {e!r} is not one of {', '.join(drl_plan.PLAN)}")
    seeds = None if args.seeds is None else _parse_seeds(args.seeds, "--seeds")
    learners = None if args.learners is None else [x.strip() for x in args.learners.split(",") if x.strip()]
    if args.workers < 1:
        raise UsageError(f"--workers {args.workers} is invalid: expected an integer >= 1")
    if args.export_pretrained:
        drl_export.check_export(args.quick, learners, envs)
    if args.figures is not None:
        _check_out(args.figures)

    plan = drl.plan_cells(out, envs, quick=args.quick, seeds=seeds, learners=learners)  # before the lock
    with FolderLock(out, need_total=drl.CELL_BYTES * len(plan["todo"]) + 20e6,
                    need_file=drl.CELL_FILE_BYTES):  # the lock clustergym run and train take
        drl.run_benchmark(out, envs, quick=args.quick, seeds=seeds, workers=args.workers,
                          progress=not args.no_progress, figures=args.figures, learners=learners, lock=False,
                          backend=args.backend)
        if args.export_pretrained:
            keys = drl_export.shipping_envs(envs)
            for key in keys:  # every check of every env first: nothing shipped is replaced when one fails
                drl_export.prepare_export(out, key)
            for key in keys:
                drl_export.export_pretrained(out, key)
    return 0


def cmd_import_model(args) -> int:
    _check_out(args.out)
    meta = import_model(args.model, args.env_id, args.out, algo=args.algo, env_kwargs=_parse_set(args.set),
                        overwrite=args.overwrite, vecnormalize=args.vecnormalize)
    inst = (f"pool of {len(meta['instances'])} instances" if meta["instances"]
            else f"instance {meta['env_kwargs'].get('scenario_seed', 0)}")
    obs = "the env's Dict" if meta["obs"] == "dict" else "FlattenObservation"
    norm = ", VecNormalize statistics" if meta["normalize"] else ""
    print(f"imported {args.model} as a {meta['algo']} model of {meta['env_id']} (observation: {obs}{norm}; "
          f"{inst}) into {args.out}")
    print(f"evaluate: clustergym run {meta['env_id']} --agents sb3:{args.out.rstrip('/')},random --seeds 0-2 "
          "--instances 10-19 --out runs/eval (instances whose spaces do not fit the model are refused)")
    return 0


def cmd_replay(args) -> int:
    agents = _split_agents(args.agents)
    if not 1 <= len(agents) <= 2:
        raise UsageError(f"--agents {args.agents!r}: expected one agent, or two for a side-by-side animation")
    _check_out(args.out, is_file=True)
    env_kwargs = _parse_set(args.set)
    for key in ("horizon", "render_mode"):
        if key in env_kwargs:
            raise UsageError(f"--set {key} is not for replay" + (" (use --horizon)" if key == "horizon" else ""))
    if args.every is not None and args.every < 1:
        raise UsageError(f"--every {args.every} is invalid: expected an integer >= 1")
    out = replay(args.env_id, agents, args.out, args.seed, horizon=args.horizon, every=args.every, fps=args.fps,
                 env_kwargs=env_kwargs, overwrite=args.overwrite, progress=not args.no_progress,
                 estimate=lambda line: print(line, flush=True))
    print(f"wrote {out}")
    return 0


def cmd_bench(args) -> int:
    if args.out is not None:
        _check_out(args.out, is_file=True)
        check_file_target(args.out, "--out")  # before the measurements: never a FIFO or a device
    bench.run_bench(only=args.only, quick=args.quick, out=args.out, tiny=args.tiny)
    return 0
