"""Command line: ``clustergym list|run|reproduce|train|bench`` (SPEC §3.5).

Errors are one clear line on stderr and exit code 2; ``--debug`` shows the traceback.
"""

from __future__ import annotations

import argparse
import json
import sys

__all__ = ["main"]


class UsageError(ValueError):
    """Bad input from the command line."""


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
                seeds.extend(range(int(lo), int(hi) + 1))
            except ValueError:
                raise UsageError(f"malformed {flag} {text!r}: expected e.g. 0,1,2 or 0-4") from None
        else:
            try:
                seeds.append(int(part))
            except ValueError:
                raise UsageError(f"malformed {flag} {text!r}: expected e.g. 0,1,2 or 0-4") from None
    if not seeds:
        raise UsageError(f"{flag} is empty")
    return seeds


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
    import clustergym
    from clustergym.agent import list_agents

    for env_id in clustergym.ENV_IDS:
        print(f"{env_id}\n    agents: {', '.join(list_agents(env_id))}")
    return 0


def cmd_run(args) -> int:
    from clustergym.runner import evaluate

    agents = _split_agents(args.agents)
    if not agents:
        raise UsageError("--agents is empty")
    instances = None if args.instances is None else _parse_seeds(args.instances, "--instances")
    res = evaluate(args.env_id, agents, _parse_seeds(args.seeds), args.horizon, env_kwargs=_parse_set(args.set),
                   workers=args.workers, backend=args.backend, progress=not args.no_progress,
                   instances=instances, score=not args.no_score)
    print(res.table())
    paths = res.write(args.out, plots=not args.no_plots)
    print("wrote " + ", ".join(paths))
    return 0


def cmd_reproduce(args) -> int:
    from clustergym.experiments import reproduce

    reproduce(args.paper, quick=args.quick, out=args.out, workers=args.workers, progress=not args.no_progress)
    return 0


def cmd_train(args) -> int:
    from clustergym.baselines.drl import train

    env_kwargs = _parse_set(args.set)
    if args.horizon is not None:
        env_kwargs["horizon"] = args.horizon
    hp = _parse_set(args.hp)
    meta = train(args.env_id, args.algo, args.timesteps, args.out, env_kwargs=env_kwargs, seed=args.seed,
                 n_envs=args.n_envs, eval_freq=args.eval_freq, eval_episodes=args.eval_episodes,
                 stats=not args.no_stats, normalize=not args.no_normalize, hyperparams=hp,
                 progress=not args.no_progress, verbose=args.verbose)
    model = f"{args.out.rstrip('/')}/model.zip"
    print(f"trained {meta['algo']} on {meta['env_id']} for {meta['timesteps']:,} steps in {meta['train_wall_s']:.0f} s")
    print(f"wrote {model}, training_curve.png, evaluations.npz, TensorBoard logs in {args.out.rstrip('/')}/tb")
    print(f"evaluate: clustergym run {meta['env_id']} --agents sb3:{model} --seeds 100-102 --out runs/eval")
    return 0


def cmd_bench(args) -> int:
    from clustergym.bench import run_bench

    run_bench(only=args.only, quick=args.quick, out=args.out)
    return 0


def build_parser() -> argparse.ArgumentParser:
    from clustergym.experiments import list_papers

    p = argparse.ArgumentParser(prog="clustergym", description="Online cluster scheduling environments and agents.")
    p.add_argument("--debug", action="store_true", help="show full tracebacks on errors")
    sub = p.add_subparsers(dest="command", required=True)

    sub.add_parser("list", help="registered envs and the agents that can act in each").set_defaults(func=cmd_list)

    r = sub.add_parser("run", help="evaluate agents on an env over instances and seeds")
    r.add_argument("env_id")
    r.add_argument("--agents", required=True, help="comma-separated, options in brackets: esdp[only_active=true],hauf")
    r.add_argument("--seeds", default="0", help="dynamics seeds, e.g. 0,1,2 or 0-4; by default the run with "
                                                "seed s uses instance (scenario_seed) s")
    r.add_argument("--instances", default=None, help="scenario seeds, e.g. 0-4: every instance x every seed "
                                                     "(--set scenario_seed=K pins one instance instead)")
    r.add_argument("--no-score", action="store_true",
                   help="skip the normalised score (saves the random reference runs)")
    r.add_argument("--horizon", type=int, default=2000)
    r.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="env kwarg (JSON value)")
    r.add_argument("--workers", type=int, default=1)
    r.add_argument("--backend", default="local", choices=["local", "ray"],
                   help="ray: one Ray task per run on $RAY_ADDRESS or a local Ray with --workers CPUs "
                        "(pip install 'clustergym[ray]'); results equal the local backend's")
    r.add_argument("--out", required=True)
    r.add_argument("--no-plots", action="store_true")
    r.add_argument("--no-progress", action="store_true")
    r.set_defaults(func=cmd_run)

    rp = sub.add_parser("reproduce", help="the papers' comparisons with tables, plots and a report")
    rp.add_argument("paper", help=f"one of {', '.join([*list_papers(), 'all'])}")
    rp.add_argument("--quick", action="store_true", help="shorter horizons and fewer seeds")
    rp.add_argument("--out", default="runs/reproduce")
    rp.add_argument("--workers", type=int, default=2)
    rp.add_argument("--no-progress", action="store_true")
    rp.set_defaults(func=cmd_reproduce)

    t = sub.add_parser("train", help="train a Stable-Baselines3 agent (saved model = agent sb3:DIR/model.zip)")
    t.add_argument("env_id")
    t.add_argument("--algo", required=True, choices=["ppo", "a2c", "sac", "maskable_ppo"])
    t.add_argument("--timesteps", type=int, required=True)
    t.add_argument("--out", required=True, help="run directory (model.zip, tb/, training_curve.png, ...)")
    t.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="env kwarg (JSON value)")
    t.add_argument("--horizon", type=int, default=None, help="episode length (default: the env's)")
    t.add_argument("--hp", action="append", default=[], metavar="KEY=VALUE",
                   help="algorithm hyperparameter (JSON value), e.g. --hp n_steps=512 --hp learning_rate=1e-4")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--n-envs", type=int, default=4, help="parallel training envs (SAC uses 1)")
    t.add_argument("--eval-freq", type=int, default=10_000, help="timesteps between evaluations")
    t.add_argument("--eval-episodes", type=int, default=2)
    t.add_argument("--no-stats", action="store_true", help="do not append the empirical statistics to observations")
    t.add_argument("--no-normalize", action="store_true", help="no VecNormalize")
    t.add_argument("--no-progress", action="store_true")
    t.add_argument("--verbose", type=int, default=0)
    t.set_defaults(func=cmd_train)

    b = sub.add_parser("bench", help="performance table (SPEC §10)")
    b.add_argument("--only", default=None, metavar="PAPER", help=f"one of {', '.join(list_papers())}")
    b.add_argument("--quick", action="store_true", help="fewer repetitions")
    b.add_argument("--out", default=None, help="also write the table as JSON here")
    b.set_defaults(func=cmd_bench)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("clustergym: interrupted", file=sys.stderr)
        return 130
    except (UsageError, ValueError, TypeError, FileNotFoundError) as exc:
        if args.debug:
            raise
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        print(f"clustergym: error: {msg}", file=sys.stderr)
        return 2
