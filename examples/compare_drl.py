"""Evaluate a trained SB3 model beside the paper agent and the baselines on held-out seeds.

Every agent sees the same arrivals and utilities for a seed (common random numbers); seeds from
1000 on are never used in training (training envs are seeded 0..n_envs-1, evaluation during
training from 10,000).

    python examples/compare_drl.py --model runs/ppo-p1/model.zip --seeds 1000,1001,1002 --out runs/cmp-p1
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import dataclass

import clustergym
from clustergym.core.agent import list_agents
from clustergym.core.family import family_spec


@dataclass
class Config:
    model: str = "runs/ppo/model.zip"
    """a model written by clustergym train (or examples/train_ppo.py)"""
    seeds: str = "1000,1001,1002"
    """held-out env seeds"""
    horizon: int = 2000
    """slots per run"""
    workers: int = 2
    """parallel processes"""
    out: str = "runs/compare_drl"
    """output folder: results.json, curves.csv, PNG plots"""


def main(cfg: Config):
    meta = json.load(open(os.path.join(os.path.dirname(cfg.model), "clustergym.json")))
    env_id, env_kwargs = meta["env_id"], {k: v for k, v in meta["env_kwargs"].items() if k != "horizon"}
    paper = family_spec(meta["family"]).paper_agent  # the paper agent first, then the paper's baselines
    others = [a for a in list_agents(env_id) if a != paper]
    agents = [f"sb3:{cfg.model}", paper, *others]
    results = clustergym.evaluate(env_id, agents, [int(s) for s in cfg.seeds.split(",")], cfg.horizon,
                                  env_kwargs=env_kwargs, workers=cfg.workers)
    print(results.table())
    print("wrote", ", ".join(results.write(cfg.out)))
    return results


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for name, f in Config.__dataclass_fields__.items():
        p.add_argument(f"--{name}", type=type(f.default), default=f.default)
    main(Config(**vars(p.parse_args())))
