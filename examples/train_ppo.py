"""Train PPO on a clustergym env with Stable-Baselines3, in one readable file.

What ``clustergym train`` does, spelled out: the env's observation (which carries the empirical
statistics a learner needs) is flattened (``DRLObservation``), observations are normalised (``VecNormalize``),
and the run directory is laid out so the model evaluates as the agent ``sb3:OUT/model.zip``.

    python examples/train_ppo.py --env-id clustergym/MultiServerChannel-v0 --timesteps 200000 --out runs/ppo-p1
    clustergym run clustergym/MultiServerChannel-v0 --agents sb3:runs/ppo-p1/model.zip,esdp,hauf --seeds 1000-1002 --out runs/cmp
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import dataclass

import numpy as np
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

import clustergym  # noqa: F401  (registers the envs)
from clustergym.core.family import env_family
from clustergym.learning.algos import SIDE_CAR
from clustergym.learning.policies import policy_class
from clustergym.learning.train_envs import make_train_env, save_normalization


@dataclass
class Config:
    env_id: str = "clustergym/MultiServerChannel-v0"
    """a registered env id"""
    timesteps: int = 20_000
    """environment steps of training (all envs together)"""
    horizon: int = 2000
    """slots per episode"""
    n_envs: int = 4
    """training envs stepped together"""
    n_steps: int = 512
    """rollout length per env between updates"""
    seed: int = 0
    """training seed (envs get seed, seed+1, ...)"""
    out: str = "runs/ppo"
    """run directory"""


def main(cfg: Config) -> str:
    torch.set_num_threads(1)
    os.makedirs(cfg.out, exist_ok=True)
    env_kwargs = {"horizon": cfg.horizon}

    # 1. N copies of the env: gym.make -> Monitor -> flatten (the observation carries the statistics) (+ [-1, 1]
    #    actions for Box).
    venv = DummyVecEnv([lambda i=i: make_train_env(cfg.env_id, env_kwargs, monitor_dir=os.path.join(cfg.out, "monitor"),
                                                   rank=i) for i in range(cfg.n_envs)])
    venv.seed(cfg.seed)
    venv = VecNormalize(venv, norm_obs=True, norm_reward=True, clip_obs=10.0)

    # 2. PPO with SB3's MLP policy, its MultiDiscrete distribution swapped for the fast padded head
    #    (clustergym.learning.heads; "MlpPolicy" works too, slower on many action dimensions).
    model = PPO(policy_class("ppo"), venv, n_steps=cfg.n_steps, batch_size=min(256, cfg.n_steps * cfg.n_envs), seed=cfg.seed,
                tensorboard_log=os.path.join(cfg.out, "tb"), verbose=0)
    model.learn(total_timesteps=cfg.timesteps, progress_bar=False)

    # 3. Save what the sb3: agent needs: the model, the normalisation statistics, and a side-car.
    model.save(os.path.join(cfg.out, "model.zip"))
    save_normalization(venv, cfg.out)  # plain arrays (vecnormalize.npz), not a pickle
    meta = {"env_id": cfg.env_id, "family": env_family(cfg.env_id), "env_kwargs": env_kwargs, "algo": "ppo",
            "stats": True, "obs_layout": "full", "normalize": True, "seed": cfg.seed, "n_envs": cfg.n_envs, "timesteps": cfg.timesteps,
            "hyperparams": {"n_steps": cfg.n_steps}, "head": "fast", "rescale_action": hasattr(venv.action_space, "low")}
    with open(os.path.join(cfg.out, SIDE_CAR), "w") as f:
        json.dump(meta, f, indent=1)

    rets = [float(line.split(",")[0]) for name in os.listdir(os.path.join(cfg.out, "monitor"))
            for line in open(os.path.join(cfg.out, "monitor", name)).read().splitlines()[2:]]
    print(f"trained PPO on {cfg.env_id} for {cfg.timesteps:,} steps; "
          f"{len(rets)} episodes, mean return {np.mean(rets) if rets else float('nan'):.1f}")
    model_path = os.path.join(cfg.out, "model.zip")
    print(f"model: sb3:{model_path}")
    return model_path


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for name, f in Config.__dataclass_fields__.items():
        p.add_argument(f"--{name.replace('_', '-')}", dest=name, type=type(f.default), default=f.default)
    main(Config(**vars(p.parse_args())))
