"""What ``clustergym train`` can train: the algorithms, their policy classes and the run folder's file names.

A family supports SAC when its ``FamilySpec.drl_hooks`` define ``box_bounds`` (Box actions) and MaskablePPO
when they define ``sb3_mask``; PPO and A2C train on every family. The algorithm classes import torch, so they
load on first use; the policies are :func:`clustergym.learning.policies.policy_class`.
"""

from __future__ import annotations

import importlib
import inspect

from clustergym.core.family import family_specs
from clustergym.learning.pipeline import hook

__all__ = ["ALGOS", "RECURRENT", "HEADS", "NETS", "SIDE_CAR", "NORM_FILE", "algo_class", "algo_gamma", "check_algo",
           "obs_layout"]

# algo -> (module, class, the family DRL hook it needs; None = every family). A family supports SAC when
# its FamilySpec.drl_hooks define ``box_bounds`` (Box actions) and MaskablePPO when they define ``sb3_mask``.
ALGOS: dict[str, tuple[str, str, str | None]] = {
    "ppo": ("stable_baselines3", "PPO", None),
    "a2c": ("stable_baselines3", "A2C", None),
    "sac": ("stable_baselines3", "SAC", "box_bounds"),
    "maskable_ppo": ("sb3_contrib", "MaskablePPO", "sb3_mask"),
    "recurrent_ppo": ("sb3_contrib", "RecurrentPPO", None),  # an LSTM policy: acts on the episode so far
}
RECURRENT = ("recurrent_ppo",)  # algorithms whose policy carries a state from slot to slot

HEADS = ("fast", "sb3")  # the action distribution: clustergym.learning.heads, or SB3's own
NETS = ("mlp", "entity", "autoregressive")  # the policy network: SB3's flat MLP, clustergym.learning.entity
# (FamilySpec.entity) or the masked autoregressive decoder of clustergym.learning.autoregressive (FamilySpec.decoder)
SIDE_CAR = "clustergym.json"
NORM_FILE = "vecnormalize.npz"


def algo_class(algo: str):
    """The SB3 / sb3-contrib algorithm class; a ValueError naming the extra to install when it is missing."""
    if algo not in ALGOS:
        raise ValueError(f"algo={algo!r} is invalid: expected one of {', '.join(ALGOS)}")
    mod, cls, _ = ALGOS[algo]
    try:
        return getattr(importlib.import_module(mod), cls)
    except ImportError:
        extra = "contrib" if mod == "sb3_contrib" else "drl"
        raise ValueError(f"algo {algo!r} needs {mod}: pip install 'clustergym[{extra}]'") from None


def check_algo(algo: str, family: str) -> None:
    """ValueError unless ``algo`` can train on ``family``."""
    if algo not in ALGOS:
        raise ValueError(f"algo={algo!r} is invalid: expected one of {', '.join(ALGOS)}")
    need = ALGOS[algo][2]
    if need is not None and hook(family, need) is None:
        fams = tuple(f.name for f in family_specs() if f.hook(need) is not None)
        raise ValueError(f"algo {algo!r} supports the families {', '.join(fams)}, not {family!r} "
                         f"(SAC needs Box actions; MaskablePPO needs discrete actions with masks)")


def obs_layout(meta: dict) -> str:
    """The flat observation layout of a run's side-car (``clustergym.learning.pipeline``): ``"full"`` for runs
    that record it, ``"legacy"`` for runs of earlier versions (which did not)."""
    return meta.get("obs_layout", "legacy")


def algo_gamma(algo: str, hp: dict) -> float:
    """The discount ``algo`` trains with: ``hp["gamma"]``, else the algorithm's own default."""
    if "gamma" in hp:
        return float(hp["gamma"])
    return float(inspect.signature(algo_class(algo).__init__).parameters["gamma"].default)
