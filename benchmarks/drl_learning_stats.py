"""PPO's learning statistics per learner of a finished ``clustergym drl`` folder, beside CartPole-v1's.

Every trained cell writes SB3's training log (TensorBoard events in ``<cell>/tb``). For each row of the
benchmark this script averages, over its training seeds and over the last 10% of its updates (and the
first 10%, to see the trend):

* ``explained_variance``: how much of the returns' variance the value function explains (1 = all; 0 or
  below = the advantages are as noisy as the returns);
* ``approx_kl``: SB3's estimate of the KL divergence between the policy before and after one update;
* ``clip_fraction``: the share of samples whose probability ratio left [1 - clip, 1 + clip] in the update
  (the clipped objective gives them no gradient);
* ``entropy``: the policy's entropy (minus SB3's ``entropy_loss``), summed over the action's dimensions.

The reference row trains CartPole-v1 with the same shared PPO setting (the anchor of ``ppo.yml``: 4 envs,
n_steps 512, batch 256, 10 epochs, learning rate 3e-4, clip 0.2, VecNormalize) in the same invocation, so
"updates several times CartPole's" is a measurement on this machine, not a figure from elsewhere.

    python benchmarks/drl_learning_stats.py runs/drl --envs p1,p3 --cartpole-steps 100000 --out runs/stats

Prints one Markdown table; writes ``table.md`` and ``stats.json`` into ``--out``.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import tempfile

import numpy as np

TAGS = {"explained_variance": "train/explained_variance", "approx_kl": "train/approx_kl",
        "clip_fraction": "train/clip_fraction", "entropy": "train/entropy_loss"}


def cell_stats(tb_dir: str) -> dict:
    """{stat: (first-10% mean, last-10% mean)} of one training run's TensorBoard events under ``tb_dir``."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    files = sorted(glob.glob(os.path.join(tb_dir, "**", "events.out.tfevents.*"), recursive=True))
    if not files:
        raise FileNotFoundError(f"no TensorBoard events under {tb_dir}")
    ea = EventAccumulator(files[-1], size_guidance={"scalars": 0})
    ea.Reload()
    out = {}
    for name, tag in TAGS.items():
        v = np.array([e.value for e in ea.Scalars(tag)], dtype=float)
        if name == "entropy":
            v = -v
        k = max(1, len(v) // 10)
        out[name] = (float(v[:k].mean()), float(v[-k:].mean()))
    out["updates"] = len(ea.Scalars(TAGS["approx_kl"]))
    return out


def row_stats(row_dir: str) -> dict | None:
    """The seed-mean of :func:`cell_stats` over the finished cells (``seed*/done.json``) of one benchmark row."""
    cells = [os.path.dirname(d) for d in sorted(glob.glob(os.path.join(row_dir, "seed*", "done.json")))]
    if not cells:
        return None
    per = [cell_stats(os.path.join(c, "tb")) for c in cells]
    return {"seeds": len(per), "updates": int(np.mean([p["updates"] for p in per])),
            **{k: tuple(float(np.mean([p[k][j] for p in per])) for j in (0, 1)) for k in TAGS}}


def cartpole_stats(steps: int, seed: int = 0) -> dict:
    """Train CartPole-v1 for ``steps`` env steps in the shared PPO setting and return :func:`cell_stats`."""
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    from clustergym.learning.hyperparams import load_hyperparams, split_run_keys

    run, hp = split_run_keys(load_hyperparams("ppo", "CartPole-v1"))
    n_envs, normalize = int(run.get("n_envs", 4)), bool(run.get("normalize", True))
    with tempfile.TemporaryDirectory() as tb:
        env = make_vec_env("CartPole-v1", n_envs=n_envs, seed=seed)
        env = VecNormalize(env) if normalize else env
        PPO("MlpPolicy", env, seed=seed, tensorboard_log=tb, verbose=0, device="cpu", **hp).learn(steps)
        return {**cell_stats(tb), "seeds": 1}


def fmt(pair) -> str:
    return f"{pair[0]:.3g} → {pair[1]:.3g}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_dir", help="a clustergym drl folder (with <env>/<learner>/seed*/tb)")
    ap.add_argument("--envs", default="p1,p2,p3,p4")
    ap.add_argument("--cartpole-steps", type=int, default=100_000, help="0: no CartPole reference row")
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    rows = []
    for env in a.envs.split(","):
        for row_dir in sorted(glob.glob(os.path.join(a.out_dir, env, "*"))):
            st = row_stats(row_dir) if os.path.basename(row_dir) not in ("eval", "eval-curve") else None
            if st is not None:
                rows.append({"env": env, "learner": os.path.basename(row_dir), **st})
    if a.cartpole_steps:
        rows.append({"env": "CartPole-v1", "learner": f"ppo ({a.cartpole_steps:,} steps)",
                     **cartpole_stats(a.cartpole_steps)})
    lines = ["| env | learner | seeds | updates | explained variance | approx KL | clip fraction | entropy |",
             "|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['env']} | {r['learner']} | {r['seeds']} | {r['updates']} | {fmt(r['explained_variance'])} | "
              f"{fmt(r['approx_kl'])} | {fmt(r['clip_fraction'])} | {fmt(r['entropy'])} |" for r in rows]
    text = ("Mean over training seeds of the first 10% → the last 10% of each run's updates.\n\n"
            + "\n".join(lines) + "\n")
    print(text)
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "table.md"), "w") as f:
            f.write(text)
        with open(os.path.join(a.out, "stats.json"), "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
