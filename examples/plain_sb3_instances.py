"""Train plain Stable-Baselines3 PPO on clustergym/ApproxJobs-v0 outside the CLI (docs/recipes.md:
"A plain SB3 model on held-out instances"); then import it and compare it on other instances:

    python examples/plain_sb3_instances.py --timesteps 4096 --out ppo_p4.zip
    clustergym import-model ppo_p4.zip --env clustergym/ApproxJobs-v0 --out runs/ppo_p4
    clustergym run clustergym/ApproxJobs-v0 --agents sb3:runs/ppo_p4,fair --instances 10-19 --seeds 0 --out runs/p4_heldout
"""

from __future__ import annotations

import argparse

import gymnasium as gym
from stable_baselines3 import PPO

import clustergym  # noqa: F401 - registers the envs


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--env", default="clustergym/ApproxJobs-v0")
    p.add_argument("--timesteps", type=int, default=4096)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="ppo_p4.zip")
    a = p.parse_args(argv)
    env = gym.wrappers.FlattenObservation(gym.make(a.env))  # instance 0 (scenario_seed 0), the default
    model = PPO("MlpPolicy", env, n_steps=256, batch_size=64, seed=a.seed, device="cpu")
    model.learn(a.timesteps)
    model.save(a.out)
    print(f"saved {a.out} ({a.timesteps} steps on {a.env})")


if __name__ == "__main__":
    main()
