"""Compare ESDP with the paper's baselines on P1 with common random numbers; write results + plots.

    python examples/compare_p1.py --horizon 2000 --seeds 0,1,2 --out runs/compare_p1
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

import clustergym


@dataclass
class Config:
    horizon: int = 2000
    """slots per run"""
    seeds: str = "0,1,2"
    """env seeds; every agent sees the same arrivals and utilities for a seed"""
    agents: str = "esdp,hauf,lcf,lwtf,random"
    """agents to compare"""
    workers: int = 2
    """parallel processes"""
    out: str = "runs/compare_p1"
    """output folder: results.json, curves.csv, PNG plots"""


def main(cfg: Config):
    results = clustergym.evaluate("clustergym/MultiServerChannel-v0", cfg.agents.split(","),
                                  [int(s) for s in cfg.seeds.split(",")], cfg.horizon, workers=cfg.workers)
    print(results.table())
    print("wrote", ", ".join(results.write(cfg.out)))
    return results


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__)
    for name, f in Config.__dataclass_fields__.items():
        p.add_argument(f"--{name}", type=type(f.default), default=f.default)
    main(Config(**vars(p.parse_args())))
