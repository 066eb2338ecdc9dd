"""Checks of what a training run is given, before anything is built: the hyperparameter files (bounded YAML),
the hyperparameter values, the seed, the memory the run would need, and the weights a model holds (finite).

Every check is a ValueError of one line naming the file or the parameter: a diverged model (NaN weights) is
neither saved nor loaded, a file that would expand into gigabytes is refused before it is parsed.
"""

from __future__ import annotations

import inspect
import math
import os
from collections.abc import Iterable
from itertools import pairwise
from typing import Any

import numpy as np

from clustergym.core.scenario import check_memory

__all__ = ["MAX_PARAM_DRAWS", "Diverged", "check_finite_weights", "check_hyperparams", "check_seed", "check_training_memory",
           "listing", "read_yaml"]

MAX_FILE_BYTES = 2**20  # a hyperparameter file is a few KiB
MAX_YAML_DEPTH = 32  # nesting of mappings and lists (the shipped files nest 3 levels)
MAX_YAML_NODES = 100_000  # values in a file, each alias counted as the values it repeats
MAX_LISTED = 5  # names an error lists before "... and N more"
MAX_PARAM_DRAWS = 10_000  # generator settings of a parameter pool (each is checked by building an env: ~2 ms)
ENV_BYTES = 2**20  # a training env with its wrappers (an estimate, for the memory check)
SEED_MAX = 2**32 - 1  # SB3 seeds numpy with the seed; the training envs take seed, seed+1, ...


def listing(names: Iterable[Any], n: int = MAX_LISTED) -> str:
    """``a, b, c`` with at most ``n`` names shown (each repr cut to 40 characters) and ``... and K more``."""
    names = list(names)
    shown = ", ".join(str(x)[:40] for x in names[:n])
    return shown + (f" ... and {len(names) - n:,} more" if len(names) > n else "")


# -- YAML files ------------------------------------------------------------------------------------------------------
def _scan_yaml(text: str, path: str) -> None:
    """Nesting depth and size with aliases expanded, from the parser's events (no recursion, nothing built)."""
    import yaml

    stack: list[list] = [[None, 0]]  # per open collection: [anchor, values in it]
    sizes: dict[str, int] = {}
    for ev in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(ev, yaml.AliasEvent):
            stack[-1][1] += sizes.get(ev.anchor, 1)
        elif isinstance(ev, yaml.ScalarEvent):
            stack[-1][1] += 1
            if ev.anchor:
                sizes[ev.anchor] = 1
        elif isinstance(ev, yaml.CollectionStartEvent):
            stack.append([ev.anchor, 0])
            if len(stack) - 1 > MAX_YAML_DEPTH:
                raise ValueError(f"{path}: nested more than {MAX_YAML_DEPTH} levels deep; a hyperparameter file "
                                 f"nests at most {MAX_YAML_DEPTH}")
        elif isinstance(ev, yaml.CollectionEndEvent):
            anchor, n = stack.pop()
            if anchor:
                sizes[anchor] = n + 1
            stack[-1][1] += n + 1
        if stack[0][1] + sum(s[1] for s in stack[1:]) > MAX_YAML_NODES:
            raise ValueError(f"{path}: more than {MAX_YAML_NODES:,} values (aliases expanded); a hyperparameter "
                             "file is a few entries")


def read_yaml(path: str) -> Any:
    """The YAML file ``path`` read with ``yaml.safe_load`` after bounding its size (:data:`MAX_FILE_BYTES`), its
    encoding (UTF-8), its nesting and its values with aliases expanded; a ValueError naming the file otherwise."""
    import yaml

    try:
        size = os.path.getsize(path)
        if size > MAX_FILE_BYTES:
            raise ValueError(f"{path}: {size:,} bytes; a hyperparameter file is at most {MAX_FILE_BYTES:,} bytes")
        with open(path, "rb") as f:
            raw = f.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise ValueError(f"{path}: unreadable ({exc.strerror or type(exc).__name__})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 text (byte {exc.start:,}); a hyperparameter file is YAML") from None
    try:
        _scan_yaml(text, path)
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ValueError(f"{path}: not valid YAML ({str(exc).splitlines()[0][:160]})") from None


# -- hyperparameter values -------------------------------------------------------------------------------------------
# name -> (low, high, low open, high open); None: unbounded
_REALS = {"learning_rate": (0.0, None, True, False), "gamma": (0.0, 1.0, False, False),
          "gae_lambda": (0.0, 1.0, False, False), "clip_range": (0.0, None, True, False),
          "vf_coef": (0.0, None, False, False), "max_grad_norm": (0.0, None, True, False),
          "rms_prop_eps": (0.0, None, True, False), "tau": (0.0, 1.0, True, False),
          "ent_coef": (0.0, None, False, False)}
_OPTIONAL_REALS = {"clip_range_vf": (0.0, None, True, False), "target_kl": (0.0, None, True, False)}
_INTS = {"n_steps": (1, 10**8), "batch_size": (1, 10**8), "n_epochs": (1, 10**5), "buffer_size": (1, 10**9),
         "learning_starts": (0, 10**12), "gradient_steps": (-1, 10**6), "target_update_interval": (1, 10**9),
         "sde_sample_freq": (-1, 10**9), "stats_window_size": (1, 10**7), "train_freq": (1, 10**9)}
_BOOLS = ("normalize_advantage", "use_sde", "use_rms_prop", "optimize_memory_usage", "use_sde_at_warmup")
_SET_BY_TRAIN = {"seed": "--seed", "verbose": "--verbose", "tensorboard_log": "the run folder (tb/)",
                 "policy": "--net / --action-head", "env": "the env id", "_init_setup_model": "nothing"}


def _real(algo: str, k: str, v, lo, hi, lo_open: bool, hi_open: bool) -> None:
    ok = isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool) and math.isfinite(v)
    if ok:
        ok = (lo is None or (v > lo if lo_open else v >= lo)) and (hi is None or (v < hi if hi_open else v <= hi))
    if not ok:
        low = "" if lo is None else f"{'>' if lo_open else '>='} {lo:g}"
        high = "" if hi is None else f"{'<' if hi_open else '<='} {hi:g}"
        raise ValueError(f"hyperparameter {k}={str(v)[:40]!s} is invalid for {algo}: expected a finite number "
                         + " and ".join(x for x in (low, high) if x))


def _ints(algo: str, k: str, v, lo: int, hi: int) -> None:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not lo <= v <= hi:
        raise ValueError(f"hyperparameter {k}={str(v)[:40]} is invalid for {algo}: expected an integer from {lo:,} "
                         f"to {hi:,}")


def _check_net_arch(algo: str, kw) -> None:
    if kw is None:
        return
    if not isinstance(kw, dict):
        raise ValueError(f"hyperparameter policy_kwargs is invalid for {algo}: expected a mapping, e.g. "
                         '{"net_arch": [64, 64]}')
    arch = kw.get("net_arch")
    layers = list(arch.values()) if isinstance(arch, dict) else [arch] if arch is not None else []
    for widths in layers:
        if not isinstance(widths, list) or any(isinstance(w, bool) or not isinstance(w, int) or w < 1 for w in widths):
            raise ValueError(f"policy_kwargs net_arch={str(arch)[:60]} is invalid for {algo}: expected a list of "
                             'layer widths (integers >= 1), or {"pi": [...], "vf": [...]}')


def check_hyperparams(algo: str, cls, hp: dict, where: str | None = None) -> None:
    """Each key of ``hp`` is a keyword argument of ``cls`` (the algorithm class) that training does not set
    itself, each known value finite and in range, each flag a YAML/JSON boolean; a ValueError naming the key
    (and ``where``, the file the values come from, when given)."""
    try:
        _check_hyperparams(algo, cls, hp)
    except ValueError as exc:
        if where is None:
            raise
        raise ValueError(f"{where}: {exc}") from None


def _check_hyperparams(algo: str, cls, hp: dict) -> None:
    params = inspect.signature(cls.__init__).parameters
    for k, flag in _SET_BY_TRAIN.items():
        if k in hp:
            raise ValueError(f"{k} is a training setting, not a hyperparameter of {algo}: use {flag}")
    if not any(p.kind is p.VAR_KEYWORD for p in params.values()):
        unknown = [k for k in hp if k not in params]
        if unknown:
            raise ValueError(f"{len(unknown):,} unknown hyperparameter{'s' if len(unknown) > 1 else ''} of {algo}: "
                             f"{listing(unknown)}")
    for k, v in hp.items():
        if k in _REALS and not (k == "ent_coef" and isinstance(v, str) and v.startswith("auto")):
            _real(algo, k, v, *_REALS[k])
        elif k in _OPTIONAL_REALS and v is not None:
            _real(algo, k, v, *_OPTIONAL_REALS[k])
        elif k == "train_freq" and isinstance(v, list) and len(v) == 2 and v[1] in ("step", "episode"):
            _ints(algo, k, v[0], *_INTS[k])  # SB3's (frequency, unit)
        elif k in _INTS:
            _ints(algo, k, v, *_INTS[k])
        elif k in _BOOLS and not isinstance(v, bool):
            raise ValueError(f"hyperparameter {k}={str(v)[:40]!r} is invalid for {algo}: expected true or false")
    _check_net_arch(algo, hp.get("policy_kwargs"))


def check_seed(seed, n_envs: int, name: str = "seed") -> int:
    """The training seed: an integer with ``seed + n_envs - 1 <= 2**32 - 1`` (the envs take seed, seed+1, ...)."""
    hi = SEED_MAX - max(int(n_envs), 1) + 1
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= seed <= hi:
        raise ValueError(f"{name}={str(seed)[:40]} is invalid: expected an integer from 0 to {hi:,} (the training "
                         f"envs are seeded {name}, {name}+1, ...)")
    return int(seed)


# -- memory ----------------------------------------------------------------------------------------------------------
def _net_params(obs_dim: int, act_dim: int, arch) -> float:
    arch = [64, 64] if arch is None else arch
    towers = list(arch.values()) if isinstance(arch, dict) else [arch, arch]
    total = 0.0
    for widths in towers:
        sizes = [obs_dim, *[float(w) for w in widths], act_dim]
        total += sum(a * b + b for a, b in pairwise(sizes))
    return total


def check_training_memory(algo: str, hp: dict, n_envs: int, timesteps: int, obs_dim: int, act_dim: int,
                          native: bool) -> None:
    """The memory check (:func:`clustergym.core.scenario.check_memory`) of a training run, before anything is
    built: the training envs, the rollout (or replay) buffer and the network with its gradients and Adam's two
    moments, all float32. A ValueError naming the sizes when it exceeds the memory available."""
    per_step = 4.0 * (obs_dim + act_dim + 8)
    if algo == "sac":
        steps = float(min(int(hp.get("buffer_size", 1_000_000)), timesteps)) * 2  # obs and next obs
    else:
        steps = float(hp.get("n_steps", 2048)) * n_envs * 2  # the buffer and its minibatch copies
    kw = hp.get("policy_kwargs")
    arch = kw.get("net_arch") if isinstance(kw, dict) else None
    net = 16.0 * _net_params(obs_dim, act_dim, arch)  # weights, gradients, Adam's two moments
    envs = (ENV_BYTES / 64 if native else ENV_BYTES) * n_envs + 4.0 * obs_dim * n_envs
    names = [f"n_envs={n_envs:,}"] + [f"{k}={hp[k]:,}" for k in ("n_steps", "buffer_size") if k in hp]
    if arch is not None:
        names.append(f"net_arch={str(arch)[:60]}")
    check_memory(envs + per_step * steps + net, ", ".join(names),
                 f"training envs, {'replay' if algo == 'sac' else 'rollout'} buffer and network")


# -- weights ---------------------------------------------------------------------------------------------------------
class Diverged(ValueError):
    """A model whose weights hold NaN or an infinity (:func:`check_finite_weights`)."""


def check_finite_weights(model, what: str) -> None:
    """A :class:`Diverged` (a ValueError) when a weight tensor of ``model`` (an SB3 model) holds NaN or an infinity: a diverged model
    is neither saved nor loaded."""
    import torch

    tensors = list(model.policy.state_dict().items())
    bad = [name for name, t in tensors if torch.is_floating_point(t) and not bool(torch.isfinite(t).all())]
    if bad:
        raise Diverged(f"{what}: {len(bad)} of {len(tensors)} weight tensors hold NaN or infinite values "
                         f"({listing(bad, 3)}); training diverged: check learning_rate, gamma and the other "
                         "hyperparameters")
