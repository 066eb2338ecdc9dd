"""The leaderboard (docs/leaderboard.md): every shipped agent of every env, normalised score on held-out instances.

``python -m clustergym.experiments.leaderboard`` (``make leaderboard``) scores, per board (:data:`BOARDS`: one per
registered env at its default setting, and one of P3's ``gpu-short`` scenario, the board ``P3-gpu-short``), the
paper's policy in the readings its reproduction compares, every registered agent of the family, the board's agents
with options, the pretrained model ``sb3:pretrained/<board name>`` (where one ships) and ``random``, through
:func:`clustergym.evaluate` (the runner of ``clustergym run``) inside a run store (``OUT/store``: an
interrupted sweep resumes), and writes

* ``OUT/<board name>/results.json``: the runner's results (the board name is the env's, ``RingAllReduce-v0``, with
  the board's suffix, ``RingAllReduce-v0-gpu-short``: the name its pretrained model ships under);
* ``DATA/<board name>.json``: what the page shows, per agent its score and value per instance, per instance the bound;
* ``CURVES/<board name>.csv`` (docs/leaderboard/curves, shipped with the site): the pretrained model's learning curve, where its training folder is given
  (``--curves ENV_NAME=DIR``: a ``clustergym train`` folder, or a ``clustergym drl`` cell);
* the page (:func:`clustergym.experiments.leaderboard_page.render`, from ``DATA`` and ``CURVES`` alone).

``--row DIR`` prints the table row of a ``clustergym run`` folder scored the board's way (same env, horizon,
env settings, instances), or one line saying what differs.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import os
import subprocess
import sys
import time

from clustergym.core.agent import list_agents
from clustergym.core.family import FamilySpec, family_specs
from clustergym.experiments.leaderboard_page import read_boards, render, row_line
from clustergym.learning.algos import SIDE_CAR
from clustergym.learning.curves import monitor_curve
from clustergym.learning.sb3_agent import PRETRAINED_DIR
from clustergym.learning.sidecar import read_side_car
from clustergym.learning.training import TrainConfig, train
from clustergym.runner.evaluation import evaluate
from clustergym.runner.results import write_json
from clustergym.runner.runstore import RunStore, use_store

__all__ = ["BOARDS", "board_agents", "board_name", "board_specs", "score_board", "write_curve", "row_of", "main"]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "docs", "data", "leaderboard")
PAGE = os.path.join(ROOT, "docs", "leaderboard.md")
CURVES = os.path.join(ROOT, "docs", "leaderboard", "curves")
DEFAULT_INSTANCES = tuple(range(15))

# Per board (keyed by its family's name, or with ``family`` naming it): the paper policy's readings its reproduction
# compares beside the default, the horizon (None: the env's own), the env settings every run gets, why the horizon
# differs from the env's, and the bound (score 1). A board with a ``suffix`` is a second board of its family: its id
# (``--envs``) and name are the env's number and name with the suffix; ``extra`` are agents with options it adds.
_WINDOW_BOUND = ("the window bound of the instance (`envs/ringallreduce/oracle.py: run_upper_bound(truth, T, "
                 "window=max_jobs)`): every job among the env's visible window of the oldest active jobs at "
                 "min(N_i, budget left) workers in every slot, GPUs and links unlimited; it holds for every policy "
                 "(an agent at it is optimal over the episode) and is the same for every agent on an instance")
BOARDS: dict[str, dict] = {
    "multiserver-channel": dict(
        readings=("esdp[only_active=true]",), horizon=None, set={},
        horizon_note="",
        bound="Σ_t of the per-slot oracle max ṽᵀx over the feasible actions (exact knapsack on the hidden means), "
              "a bound on every policy"),
    "multiserver-allocation": dict(
        readings=("ogasched[lr=eq26]", "ogasched[eta_units=problem]",
                  "ogasched[play=authors,eta_units=problem]"), horizon=None, set={},
        horizon_note="",
        bound="Q(y*), the best static allocation in hindsight of the run's arrivals and utilities; an online "
              "policy can beat it (a score above 1)"),
    "ringallreduce": dict(
        readings=("gadget[rounding_repair=true]",), horizon=None, set={},
        horizon_note="",
        episode_bound="window", bound=_WINDOW_BOUND),
    "approxjobs": dict(
        readings=("opm-noest",), horizon=None, set={},
        horizon_note="",
        bound="the fluid bound (fractional machines, the job list and the mean rates known), an expected bound: "
              "one episode can exceed it"),
    # P3 on the cluster short of GPUs, where its learners are compared (docs/drl.md): the policies with options that
    # lead there (SRPT with a row worth, SRPT and LAS with fixed sizes) are rows of their own
    "ringallreduce-gpu-short": dict(
        family="ringallreduce", suffix="-gpu-short",
        readings=("gadget[rounding_repair=true]",),
        extra=("srpt[workers=5,row_value=30]", "srpt[workers=5]", "las[thresholds=continuous,workers=3]"),
        horizon=None, set={"scenario": "gpu-short"}, horizon_note="", episode_bound="window", bound=_WINDOW_BOUND),
}


def board_specs(wanted=()) -> list[tuple[str, FamilySpec]]:
    """(board key, family spec) of every board whose id is in ``wanted`` (every board if empty), in BOARDS' order."""
    specs = {s.name: s for s in family_specs()}
    out = [(key, specs[b.get("family", key)]) for key, b in BOARDS.items() if b.get("family", key) in specs]
    return [(k, s) for k, s in out if not wanted or board_id(k, s).upper() in wanted]


def board_id(key: str, spec: FamilySpec) -> str:
    """The board's id for ``--envs``: the env's number, with the board's suffix (``P3``, ``P3-gpu-short``)."""
    return spec.number + BOARDS[key].get("suffix", "")


def board_name(key: str, spec: FamilySpec) -> str:
    """The board's name: its env's, with the board's suffix (the name its pretrained model ships under)."""
    return spec.env_ids[0].split("/")[-1] + BOARDS[key].get("suffix", "")


def board_agents(spec, key: str | None = None) -> list[tuple[str, str]]:
    """(agent spec, kind) of one board (``key``, default the family's own): paper policy and readings, the other
    registered agents, the board's agents with options, the pretrained model of its name where one ships, random
    last."""
    key = key or spec.name
    name = board_name(key, spec)
    board = BOARDS[key]
    out = [(spec.paper_agent, "paper policy")] if spec.paper_agent else []
    out += [(r, "paper policy, reading") for r in board["readings"]]
    out += [(a, "baseline") for a in list_agents(family=spec.name)
            if a not in (spec.paper_agent, "random", *board["readings"])]
    out += [(a, "baseline, with options") for a in board.get("extra", ())]
    if os.path.isdir(os.path.join(PRETRAINED_DIR, name)):
        out.append((f"sb3:pretrained/{name}", "pretrained (PPO)"))
    return out + [("random", "random (score 0)")]


def _per_instance(res, agent: str, key: str) -> dict[str, float]:
    groups: dict[str, list[float]] = {}
    for r in res.runs:
        if r.agent == agent and getattr(r, key) is not None:
            groups.setdefault(str(r.instance), []).append(float(getattr(r, key)))
    return {k: sum(v) / len(v) for k, v in groups.items()}


def _commit() -> str:
    r = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    return r.stdout.strip() or "unknown"


def score_board(spec, out: str, instances, seeds=(0,), horizon: int | None = None, workers: int = 1,
                progress: bool = False, order: int = 0, key: str | None = None) -> dict:
    """Run one board (``key``, default the family's own; resumable through ``out/store``) and return its data
    (``DATA/<board name>.json``)."""
    import gymnasium as gym

    key = key or spec.name
    board = BOARDS[key]
    name = board_name(key, spec)
    env_id = spec.env_ids[0]
    env = gym.make(env_id)
    default_h = int(env.unwrapped.horizon)
    env.close()
    h = int(horizon or board["horizon"] or default_h)
    agents = board_agents(spec, key)
    t0 = time.time()
    with use_store(RunStore(os.path.join(out, "store"))):
        res = evaluate(env_id, [a for a, _ in agents], seeds=list(seeds), horizon=h, env_kwargs=dict(board["set"]),
                       workers=workers, progress=progress, instances=list(instances))
    res.write(os.path.join(out, name), plots=False)
    if any(r.trained_on for r in res.runs):
        raise SystemExit(f"{env_id}: an evaluation instance is one the pretrained model trained on; pick others")
    if board.get("episode_bound"):  # one bound per instance, the same for every agent
        bounds = {str(i): episode_bound(env_id, int(i), h, board["set"]) for i in instances}
        rand = _per_instance(res, "random", "value_total")
        rows = [{"agent": a, "kind": kind, "scores": scores_against(_per_instance(res, a, "value_total"), rand, bounds),
                 "values": _per_instance(res, a, "value_total"), "bounds": dict(bounds)} for a, kind in agents]
    else:  # the runner's score: each run's own bound (its oracle or bound metric)
        bounds = {k: v for k, v in _per_instance(res, "random", "bound_total").items()}
        rows = [{"agent": a, "kind": kind, "scores": _per_instance(res, a, "score"),
                 "values": _per_instance(res, a, "value_total"), "bounds": _per_instance(res, a, "bound_total")}
                for a, kind in agents]
    return {"order": order, "name": name, "env_id": env_id, "family": spec.name, "number": spec.number, "horizon": h,
            "default_horizon": default_h, "horizon_note": board["horizon_note"], "env_kwargs": dict(board["set"]),
            "run_env_kwargs": res.env_kwargs, "instances": list(instances), "seeds": list(seeds),
            "bound": board["bound"], "bounds": bounds, "episode_bound": bool(board.get("episode_bound")),
            "agents": rows,
            "command": f"python -m clustergym.experiments.leaderboard --envs {board_id(key, spec)} "
                       f"--instances {_span_arg(instances)}"
                       + (f" --horizon {horizon}" if horizon else ""),
            "commit": _commit(), "date": datetime.date.today().isoformat(),
            "wall_s": round(time.time() - t0, 1)}


def episode_bound(env_id: str, instance: int, horizon: int, env_kwargs: dict) -> float:
    """P3's window bound of one instance (:func:`clustergym.envs.ringallreduce.oracle.run_upper_bound` with the
    env's visible window): a bound on the total reward of every policy over the episode, from the instance's
    hidden truth (a metric, never shown to an agent)."""
    import gymnasium as gym

    from clustergym.envs.ringallreduce.oracle import run_upper_bound

    env = gym.make(env_id, scenario_seed=instance, **env_kwargs).unwrapped
    try:
        return float(run_upper_bound(env.scenario.truth, horizon, window=env.problem.max_jobs))
    finally:
        env.close()


def scores_against(values: dict, random_values: dict, bounds: dict) -> dict:
    """Per instance (V − V_random) / (B − V_random); left out where B is not above V_random."""
    return {k: (v - random_values[k]) / (bounds[k] - random_values[k]) for k, v in values.items()
            if k in random_values and k in bounds and bounds[k] > random_values[k]}


def _span_arg(xs) -> str:
    xs = list(xs)
    return f"{xs[0]}-{xs[-1]}" if len(xs) > 1 and xs == list(range(xs[0], xs[-1] + 1)) else ",".join(map(str, xs))


def write_curve(run_dir: str, path: str) -> str:
    """The learning curve of a training folder (its Monitor files) as CSV: ``steps, episode, return``."""
    steps, ret = monitor_curve(run_dir)
    if len(steps) == 0:
        raise SystemExit(f"--curves: {run_dir} has no finished training episode in its monitor files")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["steps", "episode", "return"])
        for i, (s, r) in enumerate(zip(steps, ret)):
            w.writerow([int(s), i + 1, f"{float(r):.6g}"])
    return path


# Side-car fields a re-run must reproduce for its curve to be the shipped model's training (the rest: wall times,
# the selection record, the pool's note).
RERUN_FIELDS = ("env_id", "env_kwargs", "algo", "stats", "obs_layout", "time_cap", "instances", "normalize", "seed",
                "n_envs", "hyperparams", "head", "vec", "net", "norm_obs", "reward_normalization", "warm_start")


def rerun_curve(name: str, steps: int, out: str, path: str) -> str:
    """Train the shipped model ``sb3:pretrained/<name>``'s configuration again (its side-car: env settings, pool,
    seed, hyperparameters, network) for its first ``steps`` env steps into ``out``, check that the re-run's
    side-car records the same configuration, and write its learning curve to ``path``."""

    meta = read_side_car(os.path.join(PRETRAINED_DIR, name, SIDE_CAR))
    env_kwargs = {k: v for k, v in meta["env_kwargs"].items() if k != "horizon"}
    cfg = TrainConfig(env_id=meta["env_id"], algo=meta["algo"], timesteps=int(steps),
                      env_kwargs={**env_kwargs, "horizon": meta["env_kwargs"].get("horizon")},
                      instances=meta["instances"], seed=int(meta["seed"]), hyperparams=meta["hyperparams"],
                      head=meta["head"], net=meta["net"], n_envs=int(meta["n_envs"]), vec=meta["vec"],
                      stats=bool(meta["stats"]), normalize=bool(meta["normalize"]), curve_references=False)
    again = train(cfg, out, progress=False)
    differs = [k for k in RERUN_FIELDS if again.get(k) != meta.get(k)]
    if differs:
        raise SystemExit(f"--curves-rerun {name}: the re-run's configuration differs from the shipped model's in "
                         f"{', '.join(differs)}; no curve written")
    return write_curve(out, path)


def row_of(run_dir: str, data: str = DATA) -> str:
    """The board row of a ``clustergym run`` folder, after checking it was scored the board's way."""
    path = os.path.join(run_dir, "results.json")
    if not os.path.isfile(path):
        raise SystemExit(f"--row: {path} does not exist (a clustergym run --out folder)")
    with open(path, encoding="utf-8") as f:
        res = json.load(f)
    boards = [b for b in read_boards(data) if b["env_id"] == res.get("env_id")] if os.path.isdir(data) else []
    if not boards:
        raise SystemExit(f"--row: no board for env {res.get('env_id')!r} in {data}")
    # the board of the folder's env settings (P3 has two), else its env's first board, whose settings it then names
    board = next((b for b in boards if b["run_env_kwargs"] == res.get("env_kwargs")), boards[0])
    for key, want in (("horizon", board["horizon"]), ("env_kwargs", board["run_env_kwargs"]),
                      ("instances", board["instances"])):
        if res.get(key) != want:
            raise SystemExit(f"--row: {path} has {key} {res.get(key)!r}, the board uses {want!r}")
    if sorted({r["seed"] for r in res["runs"]}) != board["seeds"]:
        raise SystemExit(f"--row: {path} has seeds other than the board's {board['seeds']}")
    rows = []
    for agent in dict.fromkeys(r["agent"] for r in res["runs"]):
        if agent == "random":
            continue
        runs = [r for r in res["runs"] if r["agent"] == agent]
        values = {str(r["instance"]): r["value_total"] for r in runs}
        if board.get("episode_bound"):  # the board's bound of each instance against this folder's random
            rand = {str(r["instance"]): r["value_total"] for r in res["runs"] if r["agent"] == "random"}
            if not rand:
                raise SystemExit(f"--row: {path} has no random runs (the score's zero): add random to --agents")
            scores = scores_against(values, rand, board["bounds"])
            rows.append(row_line(agent, "yours", scores, values, board["bounds"])[1])
            continue
        if any(r["score"] is None for r in runs):
            raise SystemExit(f"--row: {agent} has runs without a score (run with random among the agents, no --no-score)")
        scores = {str(r["instance"]): r["score"] for r in runs}
        rows.append(row_line(agent, "yours", scores, values, board["bounds"])[1])
    return "\n".join(rows)


def curve_note(steps: int, total: int) -> str:
    """What the page says of a re-run curve (:func:`rerun_curve`) of ``steps`` of a model's ``total`` steps."""
    return (f"the first {steps:,} of its {total:,} training steps, from a re-run of its training configuration as "
            "its side-car records it (env settings, training pool, seed, hyperparameters, network; checked equal); "
            "the shipped run's own log was not kept")


def _keep_curve_note(board: dict, path: str, curve: str) -> None:
    """Scores written again keep what the page says of the curve CSV still beside them."""
    if os.path.isfile(path) and os.path.isfile(curve):
        with open(path, encoding="utf-8") as f:
            note = json.load(f).get("curve_note")
        if note:
            board["curve_note"] = note


def _rerun_into_board(name: str, args) -> None:
    """The pretrained model's re-run curve into ``--curves-dir`` and what it is into its board's ``curve_note``."""

    if not os.path.isdir(os.path.join(PRETRAINED_DIR, name)):
        return
    path = rerun_curve(name, args.curves_rerun, os.path.join(args.out, "curves", name),
                       os.path.join(args.curves_dir, f"{name}.csv"))
    total = int(read_side_car(os.path.join(PRETRAINED_DIR, name, SIDE_CAR))["timesteps"])
    board_path = os.path.join(args.data, f"{name}.json")
    with open(board_path, encoding="utf-8") as f:
        board = json.load(f)
    board["curve_note"] = curve_note(args.curves_rerun, total)
    write_json(board_path, board, indent=1)
    print("curve:", path)


def _args(argv):
    p = argparse.ArgumentParser(prog="python -m clustergym.experiments.leaderboard", description=__doc__.split("\n")[0])
    p.add_argument("--out", default="runs/leaderboard", help="runs and their store (default runs/leaderboard)")
    p.add_argument("--data", default=DATA, help="where the scores and curves go (default docs/data/leaderboard)")
    p.add_argument("--curves-dir", default=CURVES, help="learning-curve CSVs (default docs/leaderboard/curves)")
    p.add_argument("--page", default=PAGE, help="the page written from --data (default docs/leaderboard.md)")
    p.add_argument("--envs", default="", help="board ids, e.g. P1,P4 or P3-gpu-short (default: every board)")
    p.add_argument("--instances", default=_span_arg(DEFAULT_INSTANCES), help="held-out instances, e.g. 0-9")
    p.add_argument("--horizon", type=int, default=None, help="slots per run (default: each board's)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--curves", action="append", default=[], metavar="ENV_NAME=DIR",
                   help="the training folder of a pretrained model, e.g. ApproxJobs-v0=runs/drl/p4/ppo/seed0")
    p.add_argument("--curves-rerun", type=int, default=0, metavar="STEPS",
                   help="write each pretrained model's curve from a re-run of its training configuration, first STEPS steps")
    p.add_argument("--page-only", action="store_true", help="only write the page from --data")
    p.add_argument("--row", metavar="DIR", help="print the board row of a clustergym run folder and stop")
    return p.parse_args(argv)


def _instances(text: str) -> list[int]:
    """``0-9`` or ``0,3,5`` as a list of non-negative ints; a malformed text is one line on stderr, exit 2."""
    out: list[int] = []
    try:
        for part in text.split(","):
            a, _, b = part.strip().partition("-")
            out += list(range(int(a), int(b) + 1)) if b else [int(a)]
    except ValueError:
        raise SystemExit(f"--instances: malformed {text!r}, expected e.g. 0-9 or 0,3,5") from None
    if not out or min(out) < 0:
        raise SystemExit(f"--instances: {text!r} names no instance or a negative one")
    return out


def main(argv=None) -> int:
    args = _args(argv)
    if args.row:
        print(row_of(args.row, args.data))
        return 0
    if not args.page_only:
        inst = _instances(args.instances)
        wanted = {e.strip().upper() for e in args.envs.split(",") if e.strip()}
        known = {board_id(k, s).upper(): board_id(k, s) for k, s in board_specs()}
        if wanted - set(known):
            raise SystemExit(f"--envs: no board {', '.join(sorted(wanted - set(known)))}; the boards are "
                             f"{', '.join(known.values())}")
        boards = board_specs(wanted)
        for key, spec in boards:
            board = score_board(spec, args.out, inst, horizon=args.horizon, workers=args.workers,
                                order=list(BOARDS).index(key), key=key)
            name = board["name"]
            os.makedirs(args.data, exist_ok=True)
            _keep_curve_note(board, os.path.join(args.data, f"{name}.json"), os.path.join(args.curves_dir, f"{name}.csv"))
            write_json(os.path.join(args.data, f"{name}.json"), board, indent=1)
            print(f"{name}: {len(board['agents'])} agents x {len(inst)} instances, {board['wall_s']:.0f} s")
        for key, spec in boards if args.curves_rerun else []:
            _rerun_into_board(board_name(key, spec), args)
        for item in args.curves:
            name, _, folder = item.partition("=")
            print("curve:", write_curve(folder, os.path.join(args.curves_dir, f"{name}.csv")))
    with open(args.page, "w", encoding="utf-8") as f:
        f.write(render(args.data, args.curves_dir))
    print(f"wrote {args.page}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
