"""Plain SB3 on P2 (clustergym/MultiServerAllocation-v0) with the default observation and with ``obs="compact"``
(the instance's constants left out): PPO training speed beside CartPole, and the reward after the same budget.

    python benchmarks/p2_compact_obs.py                      # the figures of docs/recipes.md
    python benchmarks/p2_compact_obs.py --speed-steps 512 --learn-steps 1024 --seeds 0   # a quick look

Speed: ``PPO("MlpPolicy", FlattenObservation(env))`` training env-steps/s (n_steps 256, batch 64, 4 epochs, one
torch thread) on P2 full, P2 compact and ``CartPole-v1``, interleaved in one process (``--repeats`` rounds; the
median is printed). Learning: per seed, PPO trained for ``--learn-steps`` on a pool of instances (1000-1099,
padded with ``max_edges`` so every instance has the same spaces), then its deterministic policy's mean reward
per slot on held-out instances (10-14), for each observation mode.
"""

from __future__ import annotations

import argparse
import time

import gymnasium as gym
import numpy as np
import torch

import clustergym  # noqa: F401 - registers the envs
from clustergym.learning.instances import padding_for

P2 = "clustergym/MultiServerAllocation-v0"
POOL = list(range(1000, 1100))
HELD_OUT = list(range(10, 15))


def _ppo(env, seed: int):
    from stable_baselines3 import PPO

    return PPO("MlpPolicy", env, n_steps=256, batch_size=64, n_epochs=4, seed=seed, device="cpu")


def _p2(mode: str, horizon: int, **kw):
    return gym.wrappers.FlattenObservation(gym.make(P2, obs=mode, horizon=horizon, oracle=False, **kw))


def speed(steps: int, repeats: int, horizon: int) -> dict:
    makers = {"P2 full": lambda: _p2("full", horizon), "P2 compact": lambda: _p2("compact", horizon),
              "CartPole-v1": lambda: gym.make("CartPole-v1")}
    rates: dict = {k: [] for k in makers}
    for _ in range(repeats):
        for name, make in makers.items():
            model = _ppo(make(), 0)
            t0 = time.perf_counter()
            model.learn(steps)
            rates[name].append(steps / (time.perf_counter() - t0))
    return {k: float(np.median(v)) for k, v in rates.items()}


def held_out_reward(model, mode: str, horizon: int, pad: dict) -> float:
    vals = []
    for k in HELD_OUT:
        env = _p2(mode, horizon, scenario_seed=k, **pad)
        obs, _ = env.reset(seed=0)
        total, done = 0.0, False
        while not done:
            a, _ = model.predict(obs, deterministic=True)
            obs, r, term, trunc, _ = env.step(a)
            total, done = total + float(r), term or trunc
        vals.append(total / horizon)
    return float(np.mean(vals))


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--speed-steps", type=int, default=2048)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--learn-steps", type=int, default=8192)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    p.add_argument("--horizon", type=int, default=256)
    a = p.parse_args(argv)
    torch.set_num_threads(1)
    pad = padding_for(P2, {}, POOL + HELD_OUT)
    sizes = {m: _p2(m, a.horizon).observation_space.shape[0] for m in ("full", "compact")}
    print(f"flat inputs (instance 0): full {sizes['full']:,}, compact {sizes['compact']:,}; padding {pad}")
    rates = speed(a.speed_steps, a.repeats, a.horizon)
    for name, r in rates.items():
        print(f"speed  {name:12s} {r:8.1f} env-steps/s  ({r / rates['CartPole-v1']:.3f}x CartPole)")
    for mode in ("full", "compact"):
        scores = []
        for seed in a.seeds:
            model = _ppo(_p2(mode, a.horizon, instances=POOL, **pad), seed)
            t0 = time.perf_counter()
            model.learn(a.learn_steps)
            wall = time.perf_counter() - t0
            scores.append(held_out_reward(model, mode, a.horizon, pad))
            print(f"learn  P2 {mode:8s} seed {seed}: {a.learn_steps} steps in {wall:.0f} s, mean reward per slot on "
                  f"held-out instances {HELD_OUT[0]}-{HELD_OUT[-1]}: {scores[-1]:.4f}")
        print(f"learn  P2 {mode:8s} mean over seeds {a.seeds}: {np.mean(scores):.4f}")


if __name__ == "__main__":
    main()
