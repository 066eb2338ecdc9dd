"""Quickstart: make the P1 env, drive it with ESDP by hand, and read feedback vs metrics.

    python examples/quickstart.py --horizon 300
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

import gymnasium as gym
import numpy as np

import clustergym  # noqa: F401  (registers the clustergym/... ids)
from clustergym.core.agent import make, public_info


@dataclass
class Config:
    horizon: int = 300
    """slots to run"""
    seed: int = 0
    """env seed (arrivals and utilities)"""
    agent: str = "esdp"
    """any agent listed by `clustergym list`, options in brackets: esdp[only_active=true]"""


def main(cfg: Config) -> float:
    # paper scenario (Table 3); oracle=True: the evaluation-only per-slot optimum, for the regret below
    env = gym.make("clustergym/MultiServerChannel-v0", horizon=cfg.horizon, oracle=True)
    problem = env.unwrapped.problem  # the public problem: graph, demands, capacities, costs
    print(f"|L|={problem.num_ports} |R|={problem.num_servers} |E|={problem.num_edges} capacity={problem.capacity}")

    agent = make(cfg.agent, env_id="clustergym/MultiServerChannel-v0")
    obs, info = env.reset(seed=cfg.seed)
    agent.reset(problem, seed=cfg.seed)
    total, regret = 0.0, 0.0
    for t in range(cfg.horizon):
        action = agent.act(obs, public_info(info))  # agents never see info["metrics"]
        next_obs, reward, terminated, truncated, info = env.step(action)
        agent.update(obs, action, reward, next_obs, public_info(info))  # learns from info["feedback"]
        total += reward
        regret += info["metrics"]["regret"]  # evaluation only: uses the hidden mean utilities
        obs = next_obs
        if terminated or truncated:
            break
    print(f"{cfg.agent}: total reward {total:.1f}, regret {regret:.1f} over {t + 1} slots "
          f"({np.mean(total) / (t + 1):.3f} per slot)")
    return total


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__)
    for name, f in Config.__dataclass_fields__.items():
        p.add_argument(f"--{name}", type=type(f.default), default=f.default)
    main(Config(**vars(p.parse_args())))
