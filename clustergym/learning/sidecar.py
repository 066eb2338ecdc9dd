"""A saved model's files read as data: the side-car (:data:`~clustergym.learning.algos.SIDE_CAR`) and the
normalisation statistics (:data:`~clustergym.learning.algos.NORM_FILE`). Both come from a file the user hands in, so
the side-car's size and nesting are bounded before it is parsed and every field's type and range is checked, and the
statistics are plain arrays (``allow_pickle=False``) of checked shape and values; anything else is a ValueError naming
the file, the field and the valid values."""

from __future__ import annotations

import json
import os

import numpy as np

from clustergym.core.family import env_family, env_ids
from clustergym.core.scenario import json_depth
from clustergym.learning.algos import ALGOS, HEADS, NETS, NORM_FILE, check_algo
from clustergym.learning.pipeline import LAYOUTS
from clustergym.learning.privileged import PRIVILEGED, SHAPING

__all__ = ["OBS_MODES", "check_side_car", "read_side_car", "check_norm_file"]

# How the model's observation is built from the env's: "pipeline" (clustergym train: FlattenWithStats, +
# VecNormalize statistics) or "flatten" (a plain SB3 model trained on gymnasium's FlattenObservation(gym.make(id)),
# imported with clustergym import-model: the flattened observation, the env's own action space) or "dict" (a plain
# SB3 model trained with MultiInputPolicy on gym.make(id) itself: the env's Dict observation as it is).
OBS_MODES = ("pipeline", "flatten", "dict")


def check_side_car(meta, side: str) -> None:
    """The side-car is data from a file: its env id must be a registered clustergym id (gym.make would
    import any module named in an id like ``"pkg:Env-v0"``) and its family that id's family."""
    if not isinstance(meta, dict):
        raise ValueError(f"{side}: expected a JSON object")
    missing = [k for k in ("env_id", "family", "algo", "stats", "env_kwargs") if k not in meta]
    if missing:
        raise ValueError(f"{side}: missing field(s) {', '.join(missing)}; was it written by 'clustergym train'?")
    if meta["env_id"] not in env_ids():
        raise ValueError(f"{side}: env_id {meta['env_id']!r} is not a clustergym env "
                         f"(expected one of {', '.join(env_ids())})")
    if meta["family"] != env_family(meta["env_id"]):
        raise ValueError(f"{side}: family {meta['family']!r} does not match env_id {meta['env_id']!r}")
    if not isinstance(meta["env_kwargs"], dict):
        raise ValueError(f"{side}: env_kwargs must be an object")
    if meta.get("head", "sb3") not in HEADS:
        raise ValueError(f"{side}: head {meta['head']!r} is invalid: expected one of {', '.join(HEADS)}")
    if meta.get("obs_layout", "legacy") not in LAYOUTS:
        raise ValueError(f"{side}: obs_layout {meta['obs_layout']!r} is invalid: expected one of {', '.join(LAYOUTS)}")
    if meta.get("net", "mlp") not in NETS:
        raise ValueError(f"{side}: net {meta['net']!r} is invalid: expected one of {', '.join(NETS)}")
    if meta["algo"] not in ALGOS:
        raise ValueError(f"{side}: algo {meta['algo']!r} is invalid: expected one of {', '.join(ALGOS)}")
    try:
        check_algo(meta["algo"], meta["family"])
    except ValueError as exc:
        raise ValueError(f"{side}: {exc}") from None
    if meta.get("obs", "pipeline") not in OBS_MODES:
        raise ValueError(f"{side}: obs {meta['obs']!r} is invalid: expected one of {', '.join(OBS_MODES)}")
    for k, ok in (("privileged", PRIVILEGED), ("shaping", SHAPING)):
        if meta.get(k, "none") not in ok:
            raise ValueError(f"{side}: {k} {meta[k]!r} is invalid: expected one of {', '.join(ok)}")
    for k in ("normalize", "norm_obs", "stats", "rescale_action"):
        if k in meta and not isinstance(meta[k], bool):
            raise ValueError(f"{side}: {k} must be true or false, not {meta[k]!r}")

SIDE_CAR_MAX_BYTES = 4 * 2**20  # a side-car is a few KiB (a pool of 100,000 instances is about 1 MB)

SIDE_CAR_MAX_DEPTH = 64  # nesting of objects and lists; the side-car's own is 4

MAX_INSTANCES = 100_000  # the largest training pool a side-car may list

MAX_INSTANCE = 2**31 - 1  # instances are scenario seeds: 0 .. 2^31 - 1

MAX_HORIZON = 10**8  # slots per episode an env kwarg may ask for


MODEL_DATA_MAX_BYTES = 16 * 2**20  # the readable fields of an SB3 model.zip (its "data" entry) are a few KiB


def read_model_data(z, path: str):
    """The ``data`` entry of the SB3 model.zip open as ``z`` (a ``zipfile.ZipFile``) parsed as JSON, its size and
    nesting bounded before it is parsed; a ValueError naming ``path`` otherwise (KeyError: no such entry)."""
    size = z.getinfo("data").file_size
    if size > MODEL_DATA_MAX_BYTES:
        raise ValueError(f"{path!r}: its data entry is {size / 2**20:.1f} MiB; an SB3 model's is at most "
                         f"{MODEL_DATA_MAX_BYTES // 2**20} MiB")
    try:
        text = z.read("data").decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{path!r}: its data entry is not UTF-8 JSON") from None
    depth = json_depth(text)
    if depth > SIDE_CAR_MAX_DEPTH:
        raise ValueError(f"{path!r}: its data entry is nested {depth:,} levels deep; an SB3 model's nests at most "
                         f"{SIDE_CAR_MAX_DEPTH}")
    return json.loads(text)


def _int_in(side: str, field: str, v, lo: int, hi: int | None, what: str) -> None:
    if isinstance(v, bool) or not isinstance(v, int) or v < lo or (hi is not None and v > hi):
        rng = f"an integer >= {lo:,}" if hi is None else f"an integer from {lo:,} to {hi:,}"
        raise ValueError(f"{side}: {field} {_shown(v)} is invalid: expected {rng} ({what})")


def _shown(v) -> str:
    r = repr(v)
    return r if len(r) <= 40 else r[:37] + "..."


def read_side_car(side: str) -> dict:
    """Read and validate a side-car (:data:`SIDE_CAR`): data from a file, so its size and nesting are bounded
    before it is parsed, every field's type and range is checked, and the files it names must lie beside it.
    A ValueError naming the file, the field and the valid values otherwise."""
    try:
        size = os.path.getsize(side)
        if size > SIDE_CAR_MAX_BYTES:
            raise ValueError(f"{side}: {size / 2**20:.1f} MiB; a side-car is at most {SIDE_CAR_MAX_BYTES // 2**20} MiB")
        with open(side, encoding="utf-8") as f:
            text = f.read(SIDE_CAR_MAX_BYTES + 1)
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{side}: unreadable ({getattr(exc, 'strerror', None) or type(exc).__name__})") from None
    depth = json_depth(text)
    if depth > SIDE_CAR_MAX_DEPTH:
        raise ValueError(f"{side}: nested {depth:,} levels deep; a side-car nests at most {SIDE_CAR_MAX_DEPTH}")
    try:
        meta = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise ValueError(f"{side}: not valid JSON ({str(exc).splitlines()[0][:120] if str(exc) else 'too deep'})") \
            from None
    check_side_car(meta, side)
    for k in ("timesteps", "timesteps_trained", "seed", "n_envs", "eval_freq", "eval_seed"):
        if meta.get(k) is not None:
            _int_in(side, k, meta[k], 1 if k == "n_envs" else 0, None, "as clustergym train writes it")
    pool = meta.get("instances")
    if pool is not None:
        if not isinstance(pool, list) or not pool or len(pool) > MAX_INSTANCES:
            raise ValueError(f"{side}: instances {_shown(pool)} is invalid: expected null or a list of 1 to "
                             f"{MAX_INSTANCES:,} instance numbers (integers 0 to {MAX_INSTANCE:,})")
        for i in pool:
            _int_in(side, "instances", i, 0, MAX_INSTANCE, "an instance number")
    kw = meta["env_kwargs"]
    if "horizon" in kw:
        _int_in(side, "env_kwargs.horizon", kw["horizon"], 1, MAX_HORIZON, "slots per episode")
    if "scenario_seed" in kw:
        _int_in(side, "env_kwargs.scenario_seed", kw["scenario_seed"], 0, MAX_INSTANCE, "an instance number")
    if meta.get("normalize") and meta.get("norm_obs", True):
        norm = os.path.join(os.path.dirname(os.path.abspath(side)), NORM_FILE)
        if not os.path.exists(norm):
            raise ValueError(f"{side}: normalize is true but {NORM_FILE} is missing beside it (the model's observation "
                             f"statistics); restore it, or train the model again")
    return meta


def check_norm_file(path: str, size: int | None = None) -> dict:
    """Read and validate ``vecnormalize.npz`` (plain arrays, ``allow_pickle=False``): ``mean`` and ``var`` finite
    vectors of the model's observation size (``size``) with ``var >= 0``, ``clip_obs > 0`` and ``epsilon >= 0``
    finite scalars. A ValueError naming the file and the field otherwise (a wrong shape would broadcast, a
    negative variance would make every observation NaN)."""
    try:
        with np.load(path, allow_pickle=False) as z:
            missing = [k for k in ("mean", "var", "clip_obs", "epsilon") if k not in z.files]
            if missing:
                raise ValueError(f"{path}: missing {', '.join(missing)}; train the model again")
            n = {k: np.asarray(z[k], dtype=np.float64) for k in ("mean", "var", "clip_obs", "epsilon")}
    except (OSError, EOFError, ValueError, TypeError) as exc:
        if isinstance(exc, ValueError) and str(exc).startswith(path):
            raise
        why = str(exc).strip().splitlines()[0][:120] if str(exc).strip() else ""
        raise ValueError(f"{path}: not a normalisation statistics file ({type(exc).__name__}"
                         + (f": {why})" if why else ")")) from None
    for k in ("mean", "var"):
        if n[k].ndim != 1 or (size is not None and n[k].shape[0] != size):
            want = f"({size},)" if size is not None else "a vector"
            raise ValueError(f"{path}: {k} has shape {n[k].shape}, expected {want} (the model's observation size)")
        if not np.all(np.isfinite(n[k])):
            raise ValueError(f"{path}: {k} has non-finite entries")
    if n["mean"].shape != n["var"].shape:
        raise ValueError(f"{path}: mean and var differ in shape ({n['mean'].shape} vs {n['var'].shape})")
    if np.any(n["var"] < 0):
        raise ValueError(f"{path}: var has negative entries (a variance is >= 0)")
    for k, lo_ok in (("clip_obs", lambda v: v > 0), ("epsilon", lambda v: v >= 0)):
        if n[k].shape != () or not np.isfinite(n[k]) or not lo_ok(float(n[k])):
            raise ValueError(f"{path}: {k} must be a finite scalar {'> 0' if k == 'clip_obs' else '>= 0'}")
    return n
