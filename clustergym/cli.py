"""Command line: ``clustergym list|run|reproduce|train|drl|replay|bench``.

Errors are one clear line on stderr and exit code 2; ``--debug`` shows the traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from clustergym import bench, experiments, runner
from clustergym.agent import list_agents
from clustergym.experiments import drl, drl_export, drl_plan, list_papers
from clustergym.family import env_ids, load_plugins
from clustergym.learning import training
from clustergym.learning.hyperparams import default_algo
from clustergym.learning.importing import import_model
from clustergym.learning.instances import describe_pool
from clustergym.learning.tuning import TuneConfig, tune
from clustergym.outdir import MANIFEST  # noqa: F401  (what a command wrote into its --out)
from clustergym.outdir import FolderLock, OutputFolder, check_path
from clustergym.replay import replay
from clustergym.results import RUN_FILES
from clustergym.runner import WorkerDied, was_interrupted
from clustergym.version import __version__

__all__ = ["main"]


class UsageError(ValueError):
    """Bad input from the command line."""


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (``clustergym: error: ...``, exit 2), like every other CLI error."""

    def error(self, message: str):
        hint = f" (see {self.prog} --help)"
        self.exit(2, f"clustergym: error: {message}{hint}\n")


def _parse_set(items: list[str]) -> dict:
    """``--set key=value``: values parsed as JSON when they parse, else kept as strings."""
    out = {}
    for item in items or []:
        key, eq, val = item.partition("=")
        key = key.strip()
        if not eq or not key or not key.replace("_", "").isalnum():
            raise UsageError(f"malformed --set {item!r}: expected key=value (e.g. --set rho=0.7)")
        try:
            out[key] = json.loads(val)
        except json.JSONDecodeError:
            out[key] = val
    return out


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

    A folder (``is_file=False``): :func:`clustergym.outdir.check_path` (resolvable, names the file system
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
    total, largest = _run_sizes(n_runs * (len(agents) + 1), max(int(args.horizon), 1), not args.no_plots)
    with OutputFolder(args.out, overwrite=args.overwrite, marks=RUN_FILES, need_total=total,
                      need_file=largest) as stage:
        res = runner.evaluate(args.env_id, agents, seeds, args.horizon, env_kwargs=env_kwargs,  # looked up per call
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
    with OutputFolder(args.out, overwrite=args.overwrite, marks=(*REPRODUCE_FILES, *names),
                      need_total=50e6, need_file=2e6) as stage, _print_as(stage.path, args.out.rstrip("/")):
        kw = {"instances": instances} if instances is not None else {}
        if args.tiny:
            kw["tiny"] = True
        experiments.reproduce(args.paper, quick=args.quick, out=stage.path, workers=args.workers,
                              progress=not args.no_progress, **kw)
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
    # Trained into a staging folder inside --out; the earlier run is replaced only when this one finished.
    with OutputFolder(args.out, overwrite=args.overwrite, marks=TRAIN_FILES, need_total=20e6,
                      need_file=5e6) as stage:
        # the logs are written as training goes (into the staging folder): watchable before it ends
        print(f"TensorBoard logs, live: tensorboard --logdir {os.path.join(stage.path, 'tb')} (moved to "
              f"{os.path.join(args.out.rstrip('/'), 'tb')} when training ends)", flush=True)
        meta = training.train(args.env_id, args.algo, args.timesteps, stage.path, env_kwargs=env_kwargs,
                              seed=args.seed, n_envs=args.n_envs, eval_freq=args.eval_freq,
                              eval_episodes=args.eval_episodes, stats=not args.no_stats,
                              normalize=False if args.no_normalize else None, hyperparams=hp,
                              hyperparams_file=args.hp_file, head=args.action_head, progress=not args.no_progress,
                              verbose=args.verbose, instances=instances, net=args.net, vec=args.vec,
                              **({} if args.warm_start is None else {
                                  "warm_start": args.warm_start,
                                  "bc_steps": 20_000 if args.bc_steps is None else args.bc_steps,
                                  "bc_epochs": 30 if args.bc_epochs is None else args.bc_epochs}))
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
    out = args.out or os.path.join("runs", "tune", f"{args.env_id.split('/')[-1]}-{args.algo}")
    _check_out(out)
    instances = tuple(_parse_seeds(args.instances, "--instances"))
    cfg = TuneConfig(args.env_id, args.algo, timesteps=args.timesteps, trials=args.trials, instances=instances,
                     seeds=tuple(_parse_seeds(args.seeds, "--seeds")), horizon=args.horizon,
                     reference=args.reference, seed=args.seed, n_envs=args.n_envs,
                     env_kwargs=tuple(sorted(_parse_set(args.set).items())))
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
            keys = envs or list(drl_plan.PLAN)
            for key in keys:  # every check of every env first: nothing shipped is replaced when one fails
                drl_export.prepare_export(out, key)
            for key in keys:
                drl_export.export_pretrained(out, key)
    return 0


def cmd_import_model(args) -> int:
    _check_out(args.out)
    meta = import_model(args.model, args.env_id, args.out, algo=args.algo, env_kwargs=_parse_set(args.set),
                        overwrite=args.overwrite)
    inst = meta["env_kwargs"].get("scenario_seed", 0)
    print(f"imported {args.model} as a {meta['algo']} model of {meta['env_id']} (observation: FlattenObservation; "
          f"instance {inst}) into {args.out}")
    print(f"evaluate: clustergym run {meta['env_id']} --agents sb3:{args.out.rstrip('/')},random --seeds 0-2 "
          "--out runs/eval")
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
                 env_kwargs=env_kwargs)
    print(f"wrote {out}")
    return 0


def cmd_bench(args) -> int:
    if args.out is not None:
        _check_out(args.out, is_file=True)
    bench.run_bench(only=args.only, quick=args.quick, out=args.out)
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="clustergym", description="Online cluster scheduling environments and agents.")
    p.add_argument("--debug", action="store_true", help="show full tracebacks on errors")
    p.add_argument("--version", action="version", version=f"clustergym {_version()}",
                   help="print the installed clustergym version and exit")
    sub = p.add_subparsers(dest="command", required=True)
    # --debug also after the subcommand (SUPPRESS: a subcommand without it keeps the top-level value)
    debug = _Parser(add_help=False)
    debug.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show full tracebacks on errors")

    sub.add_parser("list", parents=[debug], help="registered envs and the agents that can act in each").set_defaults(func=cmd_list)

    r = sub.add_parser("run", parents=[debug], help="evaluate agents on an env over instances and seeds")
    r.add_argument("env_id", help="a registered env id, e.g. clustergym/MultiServerChannel-v0 (clustergym list)")
    r.add_argument("--agents", required=True, help="comma-separated, options in brackets: esdp[only_active=true],hauf")
    r.add_argument("--seeds", default="0", help="dynamics seeds, e.g. 0,1,2 or 0-4; by default the run with "
                                                "seed s uses instance (scenario_seed) s")
    r.add_argument("--instances", default=None, help="scenario seeds, e.g. 0-4: every instance x every seed "
                                                     "(--set scenario_seed=K pins one instance instead)")
    r.add_argument("--no-score", action="store_true",
                   help="skip the normalised score (saves the random reference runs)")
    r.add_argument("--horizon", type=int, default=2000, help="slots per run (default 2000)")
    r.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="env kwarg (JSON value)")
    r.add_argument("--workers", type=int, default=1, help="parallel worker processes (default 1: in this process)")
    r.add_argument("--backend", default="local", choices=["local", "ray"],
                   help="ray: one Ray task per run on $RAY_ADDRESS or a local Ray with --workers CPUs "
                        "(pip install 'clustergym[ray]'); results equal the local backend's")
    r.add_argument("--out", required=True, help="results folder (results.json, curves.csv, plots)")
    r.add_argument("--no-plots", action="store_true", help="write no PNG plots")
    r.add_argument("--overwrite", action="store_true", help="replace the results of an earlier run in --out")
    r.add_argument("--no-progress", action="store_true", help="no progress bar")
    r.set_defaults(func=cmd_run)

    rp = sub.add_parser("reproduce", parents=[debug], help="the papers' comparisons with tables, plots and a report")
    rp.add_argument("paper", help=f"one of {', '.join([*list_papers(), 'all'])}")
    rp.add_argument("--quick", action="store_true", help="shorter horizons and fewer seeds")
    rp.add_argument("--out", default="runs/reproduce", help="report folder (report.md, one folder per paper)")
    rp.add_argument("--instances", default=None, metavar="A-B",
                    help="instances (scenario seeds) of every comparison, e.g. 20-29 or 3,5,8 "
                         "(default: 0-9 with --quick, 0-19 without)")
    rp.add_argument("--tiny", action="store_true", help=argparse.SUPPRESS)  # tests of the machinery: a few slots
    rp.add_argument("--workers", type=int, default=2, help="parallel worker processes (default 2)")
    rp.add_argument("--no-progress", action="store_true", help="no progress bars")
    rp.add_argument("--overwrite", action="store_true", help="replace an earlier reproduction in --out")
    rp.set_defaults(func=cmd_reproduce)

    t = sub.add_parser("train", parents=[debug], help="train a Stable-Baselines3 agent (saved model = agent sb3:DIR/model.zip)")
    t.add_argument("env_id", help="a registered env id, e.g. clustergym/ApproxJobs-v0 (clustergym list)")
    t.add_argument("--algo", default=None, choices=["ppo", "a2c", "sac", "maskable_ppo"],
                   help="the algorithm (sac: Box actions, P2; maskable_ppo: action masks, P1 and P4; default: the "
                        "env's entry in clustergym/learning/hyperparams/defaults.yml)")
    t.add_argument("--timesteps", type=int, default=None,
                   help="env steps of training (default: n_timesteps of the hyperparameter file's entry)")
    t.add_argument("--out", default=None,
                   help="run directory (model.zip, tb/, training_curve.png, ...; default runs/train/ENV-ALGO-sSEED)")
    t.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="env kwarg (JSON value)")
    t.add_argument("--horizon", type=int, default=None, help="episode length (default: the env's)")
    t.add_argument("--hp", action="append", default=[], metavar="KEY=VALUE",
                   help="algorithm hyperparameter (JSON value) on top of the hyperparameter file's entry, "
                        "e.g. --hp n_steps=512 --hp learning_rate=1e-4")
    t.add_argument("--hp-file", default=None, metavar="YML",
                   help="hyperparameters per env id, rl-zoo3 style (default: the shipped "
                        "clustergym/learning/hyperparams/ALGO.yml)")
    t.add_argument("--action-head", default="fast", choices=["fast", "sb3"],
                   help="MultiDiscrete/MultiBinary action distribution: fast (default: one batched tensor op) or "
                        "sb3 (SB3's own, one Categorical per dimension; same maths, slower)")
    t.add_argument("--net", default="mlp", choices=["mlp", "entity"],
                   help="policy network: mlp (default: SB3's flat MLP) or entity (shared weights over P1's "
                        "channels, P2's ports (port mode) or P4's jobs (job mode) with pooling; docs/drl.md)")
    t.add_argument("--instances", default=None,
                   help="training pool of scenario seeds, e.g. 100-199: each sub-env draws one per episode "
                        "(default 1000-1099, disjoint from run's default instances; --set scenario_seed=K trains "
                        "on one instance)")
    t.add_argument("--seed", type=int, default=0, help="training seed (SB3's seed; training envs seed, seed+1, ...)")
    t.add_argument("--n-envs", type=int, default=None,
                   help="parallel training envs (default: the hyperparameter file's n_envs, else 4; SAC uses 1)")
    t.add_argument("--eval-freq", type=int, default=0,
                   help="in-training evaluation every N timesteps on held-out seeds (default 0: off; it costs "
                        "training time)")
    t.add_argument("--eval-episodes", type=int, default=2, help="episodes per in-training evaluation (default 2)")
    t.add_argument("--vec", default=None, choices=["auto", "native", "dummy", "subproc"],
                   help="how the training envs are stepped: native (the env's native vector env, one batched call; "
                        "P1, P2, P3 with action_mode=ring_size, P4), dummy (SB3's DummyVecEnv), subproc (one process "
                        "per env) or auto (default: native where it exists for the env kwargs; the hyperparameter "
                        "file's vec when it sets one)")
    t.add_argument("--no-stats", action="store_true", help="do not append the empirical statistics to observations")
    t.add_argument("--no-normalize", action="store_true", help="no VecNormalize")
    t.add_argument("--no-progress", action="store_true", help="no progress bar")
    t.add_argument("--overwrite", action="store_true", help="replace an earlier training run in --out")
    t.add_argument("--warm-start", default=None, metavar="AGENT",
                   help="behaviour cloning from this agent's decisions on training instances before PPO / "
                        "MaskablePPO fine-tuning (e.g. esdp, fair); --timesteps 0 keeps the cloned policy")
    t.add_argument("--bc-steps", type=int, default=None,
                   help="demonstration env steps for --warm-start (default 20000; only with --warm-start)")
    t.add_argument("--bc-epochs", type=int, default=None,
                   help="passes over the demonstrations for --warm-start (default 30; only with --warm-start)")
    t.add_argument("--verbose", type=int, default=0, help="SB3's verbosity: 0 (default), 1 or 2")
    t.set_defaults(func=cmd_train)

    tu = sub.add_parser("tune", parents=[debug], help="tune an algorithm's hyperparameters on validation instances "
                        "(Optuna; resumable, shareable storage)")
    tu.add_argument("env_id", help="a registered env id")
    tu.add_argument("--algo", default=None, choices=["ppo", "a2c", "maskable_ppo"],
                    help="the algorithm (default: the env's entry in hyperparams/defaults.yml)")
    tu.add_argument("--trials", type=int, default=20, help="trials this process runs (default 20)")
    tu.add_argument("--timesteps", type=int, default=100_000, help="env steps of training per trial (default 100000)")
    tu.add_argument("--instances", default="900-909",
                    help="validation instances the trials are scored on (default 900-909; never the training pool "
                         "1000-1099 nor the evaluation instances 0-99)")
    tu.add_argument("--seeds", default="0", help="dynamics seeds of the validation runs (default 0)")
    tu.add_argument("--horizon", type=int, default=200, help="slots per training episode and validation run "
                    "(default 200)")
    tu.add_argument("--reference", default=None, metavar="AGENT",
                    help="the baseline that scores 1 (default: lcf, drf, greedy, fair for P1-P4)")
    tu.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="env kwarg (JSON value)")
    tu.add_argument("--n-envs", type=int, default=None, help="training envs per trial (default 4)")
    tu.add_argument("--seed", type=int, default=0, help="the sampler's seed (trial k trains with seed + k)")
    tu.add_argument("--storage", default=None, metavar="URL",
                    help="Optuna storage shared by several tuning processes or machines (default: sqlite in --out)")
    tu.add_argument("--study", default=None, help="study name (default ENV-ALGO); an existing study is continued")
    tu.add_argument("--out", default=None, help="folder of tuning.json and the default storage "
                    "(default runs/tune/ENV-ALGO)")
    tu.add_argument("--no-progress", action="store_true", help="no line per trial")
    tu.set_defaults(func=cmd_tune)

    d = sub.add_parser("drl", parents=[debug], help="the learned-scheduler benchmark: train on an instance pool, "
                       "evaluate on held-out instances beside the paper policies (resumable)")
    d.add_argument("--out", default=None, help="benchmark folder; finished cells in it are reused (default runs/drl; "
                   "--quick: runs/drl-quick; one folder holds one of the two)")
    d.add_argument("--envs", default=None, help="comma-separated: p1,p2,p3,p4 (default: all; --quick: p4)")
    d.add_argument("--learners", default=None, help="only these learners, e.g. ppo,maskable_ppo")
    d.add_argument("--seeds", default=None, help="training seeds (default 0-2; --quick: 0,1)")
    d.add_argument("--quick", action="store_true", help="CI-sized: tiny budgets, horizon 50, P4 unless --envs")
    d.add_argument("--workers", type=int, default=2, help="cells trained in parallel (one process each; with --backend "
                   "ray the CPUs of the local Ray instance it starts)")
    d.add_argument("--backend", default="local", choices=["local", "ray"],
                   help="where the cells train: local processes (default) or Ray tasks (the Ray instance this process "
                        "is connected to, else $RAY_ADDRESS, else a local one; on a cluster --out must be on a shared "
                        "file system)")
    d.add_argument("--figures", default=None, help="also copy the learning-curve figures here (docs/figures)")
    d.add_argument("--export-pretrained", action="store_true",
                   help="replace the shipped sb3:pretrained/<EnvName> models with each env's best learner (its lowest "
                        "training seed); only from the full benchmark with every learner")
    d.add_argument("--no-progress", action="store_true", help="no progress bars")
    d.set_defaults(func=cmd_drl)

    v = sub.add_parser("replay", parents=[debug], help="an agent's episode as an animation (GIF/MP4), or two agents "
                       "side by side on the same instance and seed")
    v.add_argument("env_id", help="a registered env id, e.g. clustergym/MultiServerChannel-v0 (clustergym list)")
    v.add_argument("--agents", required=True, help="one agent, or two comma-separated (side by side), e.g. esdp,lcf")
    v.add_argument("--seed", type=int, default=0, help="dynamics seed (and instance, unless --set scenario_seed=K)")
    v.add_argument("--horizon", type=int, default=None, help="episode length (default: the env's)")
    v.add_argument("--every", type=int, default=None,
                   help="slots between frames (default: about 100 frames per episode)")
    v.add_argument("--fps", type=float, default=8.0, help="frames per second of the animation")
    v.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="env kwarg (JSON value)")
    v.add_argument("--out", required=True, help="the animation file: .gif, or .mp4 (needs imageio-ffmpeg)")
    v.set_defaults(func=cmd_replay)

    b = sub.add_parser("bench", parents=[debug], help="performance table")
    b.add_argument("--only", default=None, metavar="PAPER", help=f"one of {', '.join(list_papers())}")
    b.add_argument("--quick", action="store_true", help="fewer repetitions")
    b.add_argument("--out", default=None, help="also write the table as JSON here")
    b.set_defaults(func=cmd_bench)

    im = sub.add_parser("import-model", parents=[debug], help="make a model trained with plain Stable-Baselines3 "
                        "(on FlattenObservation(gym.make(ENV))) an sb3: agent: checks its spaces, writes the side-car")
    im.add_argument("model", help="the model.zip SB3 saved")
    im.add_argument("--env", dest="env_id", required=True, help="the env id it was trained on, e.g. clustergym/ApproxJobs-v0")
    im.add_argument("--algo", default="ppo", choices=["ppo", "a2c", "sac", "maskable_ppo"],
                    help="the SB3 algorithm it was trained with (default ppo)")
    im.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="an env kwarg it was trained with (JSON value), e.g. --set scenario_seed=3")
    im.add_argument("--out", required=True, help="run folder to write (model.zip, clustergym.json); then sb3:OUT")
    im.add_argument("--overwrite", action="store_true", help="replace an earlier model in --out")
    im.set_defaults(func=cmd_import_model)
    return p


def _version() -> str:
    return __version__


def _interrupt_message(exc, args) -> str:
    """The one line of an interrupted command: the runner's count of finished runs when it has one."""
    text = str(exc).strip() if exc is not None else ""
    if text and text != "terminated":
        return text
    what = "terminated" if text == "terminated" else "interrupted"
    kept = {"train": "; nothing in --out was replaced (an earlier run there is intact)",
            "drl": "; finished cells are kept, the cells in training were discarded",
            "import-model": "; nothing was written"}.get(getattr(args, "command", ""), "; nothing was written")
    return what + kept


def _on_sigterm(signum, frame):
    raise KeyboardInterrupt("terminated")


def main(argv: list[str] | None = None) -> int:
    import signal
    import threading

    parser = build_parser()
    args = parser.parse_args(argv)
    try:  # user families: $CLUSTERGYM_PLUGINS and the entry-point group clustergym.families

        load_plugins()
    except Exception as exc:  # noqa: BLE001 - a broken plugin is one line too, unless --debug
        if args.debug:
            raise
        print(f"clustergym: error: plugin: {str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__}",
              file=sys.stderr)
        return 2
    old = None
    if threading.current_thread() is threading.main_thread():
        # SIGTERM stops a run like Ctrl-C: the worker processes are terminated, nothing half-written is left.
        old = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt as exc:
        print(f"clustergym: {_interrupt_message(exc, args)}", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `clustergym list | head`: the reader left; not an error of ours
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as exc:  # a full disk, ulimit -f, a folder removed under us: one line, the earlier run intact
        if args.debug:
            raise
        if exc.errno is None:  # raised by us with a message (e.g. FileNotFoundError("no SB3 model at ..."))
            msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        else:
            where = f" {exc.filename}" if getattr(exc, "filename", None) else ""
            msg = (f"{exc.strerror or type(exc).__name__}{':' if where else ''}{where} (nothing in --out was "
                   "replaced: an earlier run there is intact)")
        print(f"clustergym: error: {msg}", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - user errors are one line; everything else too, unless --debug
        import gymnasium

        if was_interrupted(exc) and not args.debug:  # Ctrl-C inside compiled code (numba, torch) that wrapped it
            print(f"clustergym: {_interrupt_message(None, args)}", file=sys.stderr)
            return 130

        if not isinstance(exc, (UsageError, ValueError, TypeError, FileNotFoundError, gymnasium.error.Error,
                                WorkerDied)):
            raise
        if args.debug:
            raise
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        print(f"clustergym: error: {msg}", file=sys.stderr)
        return 2
    finally:
        if old is not None:
            signal.signal(signal.SIGTERM, old)
