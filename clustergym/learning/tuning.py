"""Hyperparameter tuning on validation instances: ``clustergym tune ENV_ID`` (Optuna, as rl-zoo3 tunes).

A study samples the algorithm's hyperparameters (:data:`SEARCH_SPACE`) with Optuna's TPE sampler; each
trial trains with :func:`clustergym.learning.training.train` for ``timesteps`` env steps on the default
training pool (:data:`~clustergym.learning.instances.DEFAULT_TRAIN_INSTANCES`, 1000-1099) and is scored on
**validation instances** (default 900-909, a part of
:data:`~clustergym.learning.instances.DEFAULT_VALIDATION_INSTANCES`): disjoint from the training pool and
from every evaluation set (``clustergym run``'s and ``clustergym drl``'s instances are below 100). Tuning
never sees an evaluation instance. On RingAllReduce the validation runs pair instance and seed
(``instances=None``: instance = seed, seeds 900-909 by default: :func:`instance_is_seed`, the family's hook
``INSTANCE_IS_SEED``): an instance draws its topology and its job stream and the env's reset seed changes
neither, so this is one run per instance, each with its own seed for whatever a policy or baseline draws (the
baselines' static sizes).

The objective is the **baseline-normalised value**, per (validation instance, dynamics seed)::

    (V_learner − V_random) / (V_reference − V_random)

with V a run's evaluated total (``RunResult.value_total``: the expected reward where the env reports it,
else the realised one), averaged over the runs: 0 = random, 1 = the reference baseline (:func:`reference_agent`,
the family's hook ``TUNING_REFERENCE``: the best simple rule of each env at the training horizon). The reference and random runs do not depend on
the trial; they are run once per study and kept in the study's user attributes.

Each trial trains ``train_seeds`` seeds (default 2) and is scored on the mean of their values per run. One
seed (rl-zoo3's choice, ``--train-seeds 1``) costs half as much but chooses on seed luck where seeds differ
much: the shipped one-seed studies' best trials scored lower on three seeds than on their one (docs/drl.md,
"Tuning"); ``--train-seeds 3`` averages more of it out.

The record (``tuning.json`` in ``--out``): the settings (env, algorithm, budget, validation instances,
seeds, horizon, reference, search space), every trial (parameters, objective, per-instance values, state,
wall time) and the best trial. Copy it next to the family's hyperparameter files (its ``tuning/`` folder,
``envs/<family>/hyperparams/tuning/<EnvName>-<algo>[-entity].json``: :func:`clustergym.learning.hyperparams.tuning_dir`)
when adopting its values; the yml entry then lists them under ``tuned`` (a run key the algorithm never sees).

Several processes or machines can tune one study at once: give them the same ``--storage`` (an Optuna
RDB URL, e.g. ``postgresql://...`` or a shared ``sqlite:///`` file) and ``--study``; each runs its own
trials and the record is written from the storage. With one process, the same ``--seed`` gives the same
trials (TPE is seeded and every trial trains with a fixed seed); with several, the order in which trials
finish decides what the sampler sees, so the trials differ. A continued study (the same ``--out`` or storage)
keeps its settings (:data:`STUDY_SETTINGS`, stored with the study and in its record): a run with any of them
different is refused before anything runs (:func:`check_continuation`), only the number of trials may change. It
seeds its sampler from ``--seed`` and the number of trials already in the study, so it proposes new
hyperparameters rather than the first run's again. Ctrl-C keeps the finished trials (they count when the
study is continued) and writes the record of what finished.

A ``--storage`` URL is checked before any folder is made: a known database, its driver installed, an SQLite
file's folder present and writable and the file itself an SQLite database, a server that answers.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from clustergym.core.family import env_hook
from clustergym.core.scenario import check_memory
from clustergym.learning.hp_checks import Diverged
from clustergym.learning.instances import DEFAULT_EVAL_INSTANCES, DEFAULT_TRAIN_INSTANCES
from clustergym.learning.training import TrainConfig, train
from clustergym.runner.evaluation import evaluate

__all__ = ["SEARCH_SPACE", "VALIDATION", "TuneConfig", "sample_params", "normalised_value", "tune", "record_of",
           "study_name_of", "check_storage", "sampler_seed", "default_runs", "instance_is_seed", "reference_agent",
           "stored_values", "STUDY_SETTINGS", "settings_of", "check_continuation"]

VALIDATION = tuple(range(900, 910))  # the default validation instances (part of DEFAULT_VALIDATION_INSTANCES)

TRIAL_SEED_STRIDE = 1000  # training seed k of a trial: seed + trial number + k * this (k = 0: the one-seed studies')


def instance_is_seed(env_id: str) -> bool:
    """Whether the validation runs of ``env_id`` are instance = seed by default (module docstring): its family's
    ``drl_hooks`` hook ``INSTANCE_IS_SEED`` (False without one)."""
    return bool(env_hook(env_id, "INSTANCE_IS_SEED"))


def default_runs(env_id: str) -> tuple[tuple[int, ...] | None, tuple[int, ...]]:
    """The default validation runs of ``env_id``: (instances, dynamics seeds); instances None = instance = seed."""
    return (None, VALIDATION) if instance_is_seed(env_id) else (VALIDATION, (0,))


def reference_agent(env_id: str) -> str | None:
    """The default reference agent of the objective (the "1") on ``env_id``: its family's ``drl_hooks`` hook
    ``TUNING_REFERENCE``, the best simple rule at the training horizon (docs/drl.md); None without one."""
    return env_hook(env_id, "TUNING_REFERENCE")


# Per algorithm: name -> ("log", low, high) | ("choice", values). The rollout length and batch size are
# chosen per training env (``n_steps`` is per env, as SB3's).
SEARCH_SPACE: dict[str, dict[str, tuple]] = {
    "ppo": {"learning_rate": ("log", 1e-5, 3e-3), "n_steps": ("choice", (128, 256, 512, 1024)),
            "batch_size": ("choice", (64, 128, 256, 512)), "n_epochs": ("choice", (3, 5, 10, 20)),
            "gamma": ("choice", (0.0, 0.5, 0.9, 0.99)), "gae_lambda": ("choice", (0.8, 0.9, 0.95, 0.99)),
            "clip_range": ("choice", (0.1, 0.2, 0.3)), "ent_coef": ("log", 1e-8, 0.05)},
    "a2c": {"learning_rate": ("log", 1e-5, 3e-3), "n_steps": ("choice", (5, 16, 64, 128)),
            "gamma": ("choice", (0.0, 0.5, 0.9, 0.99)), "gae_lambda": ("choice", (0.8, 0.9, 0.95, 1.0)),
            "ent_coef": ("log", 1e-8, 0.05)},
}
SEARCH_SPACE["maskable_ppo"] = SEARCH_SPACE["ppo"]


def sample_params(trial, algo: str) -> dict:
    """The trial's hyperparameters from :data:`SEARCH_SPACE` (``batch_size`` capped at one rollout)."""
    if algo not in SEARCH_SPACE:
        raise ValueError(f"algo={algo!r} cannot be tuned: expected one of {', '.join(sorted(SEARCH_SPACE))}")
    out: dict[str, Any] = {}
    for name, spec in SEARCH_SPACE[algo].items():
        if spec[0] == "log":
            out[name] = float(trial.suggest_float(name, spec[1], spec[2], log=True))
        else:
            out[name] = trial.suggest_categorical(name, list(spec[1]))
    return out


def normalised_value(learner: dict, reference: dict, random: dict) -> dict:
    """Per run key (instance, seed): (V − V_random) / (V_reference − V_random); keys where the reference
    does not beat random (a zero or negative denominator) are left out."""
    out = {}
    for k, v in learner.items():
        den = reference[k] - random[k]
        if den > 1e-12:
            out[k] = (v - random[k]) / den
    return out


@dataclass(frozen=True)
class TuneConfig:
    env_id: str
    algo: str = "ppo"
    timesteps: int = 100_000
    trials: int = 20
    instances: tuple[int, ...] | None = VALIDATION  # None: instance = seed over ``seeds``
    seeds: tuple[int, ...] = (0,)
    horizon: int = 200
    reference: str | None = None  # None: reference_agent(env_id), the family's TUNING_REFERENCE
    seed: int = 0
    n_envs: int | None = None
    env_kwargs: tuple = ()  # (key, value) pairs on top of the hyperparameter file's env_kwargs
    net: str = "mlp"  # the policy network the trials train: "mlp", "entity" (the per-entity network) or
    # "autoregressive" (P3's masked decoder of ring sizes)
    train_seeds: int = 2  # training seeds per trial: its value per run is the mean over them (TRIAL_SEED_STRIDE)

    def reference_agent(self) -> str:
        ref = self.reference or reference_agent(self.env_id)
        if ref is None:
            raise ValueError(f"{self.env_id} has no default reference baseline: give reference=AGENT")
        return ref


def _values(res, agent: str) -> dict:
    return {(r.instance, r.seed): float(r.value_total) for r in res.runs if r.agent == agent}


def _instances(cfg: TuneConfig) -> list[int] | None:
    return None if cfg.instances is None else list(cfg.instances)


def _check_instances(instances: Sequence[int]) -> None:
    bad = sorted(set(instances) & (set(DEFAULT_TRAIN_INSTANCES) | set(DEFAULT_EVAL_INSTANCES)))
    if bad:
        raise ValueError(f"validation instances {bad[:5]} are in the training pool or the evaluation instances: "
                         "tune on others (default 900-909)")


def stored_values(study) -> tuple[dict, dict]:
    """The reference baseline's and random's values per validation run (instance, seed), as the study stored them."""
    dec = lambda d: {tuple(json.loads(k)): v for k, v in d.items()}  # noqa: E731
    return dec(study.user_attrs["reference_values"]), dec(study.user_attrs["random_values"])


def _reference_values(cfg: TuneConfig, study) -> tuple[dict, dict]:
    """The reference baseline's and random's values on the validation runs (once per study)."""
    if "reference_values" in study.user_attrs:
        return stored_values(study)
    ref = cfg.reference_agent()
    res = evaluate(cfg.env_id, [ref, "random"], seeds=list(cfg.seeds), horizon=cfg.horizon,
                   env_kwargs=dict(cfg.env_kwargs), instances=_instances(cfg), progress=False, score=False)
    r, z = _values(res, ref), _values(res, "random")
    enc = lambda d: {json.dumps(list(k)): v for k, v in d.items()}  # noqa: E731
    study.set_user_attr("reference_values", enc(r))
    study.set_user_attr("random_values", enc(z))
    return r, z


def _objective(cfg: TuneConfig, ref: dict, rnd: dict, progress: bool) -> Callable:
    def objective(trial) -> float:
        hp = sample_params(trial, cfg.algo)
        n_envs = cfg.n_envs or 4
        if "batch_size" in hp:  # at most one rollout (n_steps per env x n_envs)
            hp["batch_size"] = min(hp["batch_size"], hp["n_steps"] * n_envs)
        per_seed, train_s, steps = [], 0.0, 0
        for k in range(cfg.train_seeds):  # seed k of trial n trains with seed + n + k * TRIAL_SEED_STRIDE
            with tempfile.TemporaryDirectory(prefix="clustergym-tune-") as tmp:
                t0 = time.perf_counter()
                config = TrainConfig(cfg.env_id, cfg.algo, cfg.timesteps,
                                     env_kwargs={"horizon": cfg.horizon, **dict(cfg.env_kwargs)},
                                     seed=cfg.seed + trial.number + k * TRIAL_SEED_STRIDE, n_envs=n_envs,
                                     hyperparams=hp, net=cfg.net)
                try:
                    meta = train(config, tmp, progress=False)
                except Diverged as exc:  # these values make training diverge: the trial is pruned, the study goes on
                    import optuna

                    raise optuna.TrialPruned(str(exc)) from None
                train_s += time.perf_counter() - t0
                steps += int(meta.get("timesteps_trained", meta["timesteps"]))
                res = evaluate(cfg.env_id, [f"sb3:{tmp}"], seeds=list(cfg.seeds), horizon=cfg.horizon,
                               env_kwargs=dict(cfg.env_kwargs), instances=_instances(cfg), progress=False,
                               score=False)
                per_seed.append(_values(res, f"sb3:{tmp}"))
        mean_runs = {key: float(np.mean([d[key] for d in per_seed])) for key in per_seed[0]}
        vals = normalised_value(mean_runs, ref, rnd)
        if not vals:
            raise ValueError(f"the reference {cfg.reference_agent()} does not beat random on any validation run: "
                             "choose another reference")
        value = float(np.mean(list(vals.values())))
        trial.set_user_attr("per_run", {json.dumps(list(k)): v for k, v in vals.items()})
        trial.set_user_attr("hyperparams", hp)  # as trained (batch_size capped at one rollout)
        trial.set_user_attr("train_wall_s", round(train_s, 1))
        trial.set_user_attr("timesteps_trained", steps)  # summed over the trial's training seeds
        if progress:
            print(f"trial {trial.number}: {value:+.3f} ({', '.join(f'{k}={v:.3g}' for k, v in hp.items())}; "
                  f"{train_s:.0f} s)", flush=True)
        return value

    return objective


# The settings a study's values depend on, as its record holds them, and the option of ``clustergym tune`` that sets
# each: a continued study (the same --out or --storage and --study) must have them all equal.
STUDY_SETTINGS = {"env_id": "ENV_ID", "algo": "--algo", "net": "--net", "timesteps_per_trial": "--timesteps",
                  "horizon": "--horizon", "reference": "--reference", "validation_instances": "--instances",
                  "seeds": "--seeds", "env_kwargs": "--set", "train_seeds": "--train-seeds", "n_envs": "--n-envs",
                  "sampler_seed": "--seed", "study": "--study"}


def settings_of(cfg: TuneConfig, name: str) -> dict:
    """The :data:`STUDY_SETTINGS` of a study ``name`` tuned with ``cfg``, as its record holds them (JSON values)."""
    return json.loads(json.dumps({
        "env_id": cfg.env_id, "algo": cfg.algo, "net": cfg.net, "timesteps_per_trial": cfg.timesteps,
        "horizon": cfg.horizon, "reference": cfg.reference_agent(),
        "validation_instances": "instance = seed" if cfg.instances is None else list(cfg.instances),
        "seeds": list(cfg.seeds), "env_kwargs": dict(cfg.env_kwargs), "train_seeds": cfg.train_seeds,
        "n_envs": cfg.n_envs or 4, "sampler_seed": cfg.seed, "study": name}))


def _shown(value) -> str:
    """A setting as a user types it: runs of integers as ``a-b``, kwargs as ``k=v``."""
    if isinstance(value, dict):
        return ",".join(f"{k}={v}" for k, v in sorted(value.items())) or "none"
    if isinstance(value, list) and value and all(isinstance(v, int) for v in value):
        if value == list(range(value[0], value[0] + len(value))) and len(value) > 1:
            return f"{value[0]}-{value[-1]}"
        return ",".join(map(str, value))
    return "seed" if value == "instance = seed" else str(value)


def check_continuation(held: dict, cfg: TuneConfig, name: str, where: str, instead: str) -> None:
    """A ValueError (one line naming the option) where a setting of the study (``held``: its record or stored
    settings; a setting it lacks is not compared) differs from ``cfg``'s: its values are not comparable."""
    now = settings_of(cfg, name)
    for key, flag in STUDY_SETTINGS.items():
        if key in held and held[key] != now[key]:
            raise ValueError(f"tune: {flag} {_shown(now[key])} differs from the study in {where} "
                             f"({_shown(held[key])}); use another {instead}")


def _held_record(out: str) -> dict | None:
    """The record ``tuning.json`` in ``out`` of an earlier run (None without one); a ValueError if it is not one."""
    path = os.path.join(out, "tuning.json")
    if not os.path.lexists(path):
        return None
    try:
        with open(path) as f:
            rec = json.load(f)
    except (OSError, UnicodeDecodeError, ValueError):
        rec = None
    if not isinstance(rec, dict) or not isinstance(rec.get("trials"), list):
        raise ValueError(f"tune: {path} is not a tuning record (it would be replaced); use another --out")
    return rec


def record_of(study, cfg: TuneConfig) -> dict:
    """The study's record (module docstring) from its storage: settings, every trial, the best one."""
    trials = []
    for t in study.trials:
        trials.append({"number": t.number, "state": t.state.name, "value": t.value,
                       "params": t.user_attrs.get("hyperparams", t.params),
                       "per_run": t.user_attrs.get("per_run"), "train_wall_s": t.user_attrs.get("train_wall_s"),
                       "timesteps_trained": t.user_attrs.get("timesteps_trained"),
                       "wall_s": (None if t.datetime_complete is None or t.datetime_start is None
                                  else round((t.datetime_complete - t.datetime_start).total_seconds(), 1))})
    done = [t for t in trials if t["state"] == "COMPLETE" and t["value"] is not None and math.isfinite(t["value"])]
    best = max(done, key=lambda t: t["value"]) if done else None
    return {"env_id": cfg.env_id, "algo": cfg.algo, "study": study.study_name,
            "objective": "mean over validation runs of (V - V_random) / (V_reference - V_random); 1 = reference",
            "reference": cfg.reference_agent(), "timesteps_per_trial": cfg.timesteps, "horizon": cfg.horizon,
            "validation_instances": "instance = seed" if cfg.instances is None else list(cfg.instances),
            "seeds": list(cfg.seeds), "sampler": "TPE",
            "sampler_seed": cfg.seed, "env_kwargs": dict(cfg.env_kwargs), "net": cfg.net,
            "train_seeds": cfg.train_seeds, "n_envs": cfg.n_envs or 4,
            "search_space": {k: list(v) if not isinstance(v[1], tuple) else [v[0], list(v[1])]
                             for k, v in SEARCH_SPACE[cfg.algo].items()},
            "trials": trials, "best": best}


SQLITE_MAGIC = b"SQLite format 3\x00"  # the first 16 bytes of every SQLite database file


def check_storage(url: str) -> None:
    """A ValueError (one line, the password hidden) for an Optuna storage URL that cannot work, before any folder
    is made: not a URL, an unknown scheme, a database driver that is not installed, an SQLite file whose folder is
    missing or not writable or that is not an SQLite database, a server that does not answer."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError

    try:
        u = make_url(url)
    except ArgumentError:
        raise ValueError(f"--storage {url!r} is not a database URL: expected e.g. sqlite:///study.db or "
                         "postgresql://user:password@host/db") from None
    shown = u.render_as_string(hide_password=True)
    try:
        dialect = u.get_dialect()
    except NoSuchModuleError:
        raise ValueError(f"--storage {shown!r}: unknown database {u.get_backend_name()!r}; expected e.g. sqlite, "
                         "postgresql, mysql") from None
    try:
        dialect.import_dbapi()
    except ImportError as exc:
        raise ValueError(f"--storage {shown!r}: the {u.get_backend_name()} driver is not installed "
                         f"({exc.name or exc}); pip install it or use sqlite:///FILE") from None
    if u.get_backend_name() == "sqlite":
        db = u.database or ""
        if db in ("", ":memory:"):
            raise ValueError(f"--storage {shown!r}: an in-memory database keeps no trials; give a file, "
                             "e.g. sqlite:///study.db")
        folder = os.path.dirname(os.path.abspath(db))
        if not os.path.isdir(folder):
            raise ValueError(f"--storage {shown!r}: the folder {folder!r} does not exist")
        if os.path.isdir(db):
            raise ValueError(f"--storage {shown!r}: {db!r} is a folder; expected an SQLite database file")
        if os.path.exists(db):
            try:
                with open(db, "rb") as f:
                    head = f.read(len(SQLITE_MAGIC))
            except OSError as exc:
                raise ValueError(f"--storage {shown!r}: cannot read {db!r} ({exc.strerror})") from None
            if head and head != SQLITE_MAGIC:
                raise ValueError(f"--storage {shown!r}: {db!r} is not an SQLite database (it would be overwritten "
                                 "or fail); choose another file")
            if not os.access(db, os.W_OK):
                raise ValueError(f"--storage {shown!r}: {db!r} is not writable")
        elif not os.access(folder, os.W_OK | os.X_OK):
            raise ValueError(f"--storage {shown!r}: the folder {folder!r} is not writable")
        return
    from sqlalchemy import create_engine

    try:  # a server: it must answer now, not after the folder is made
        engine = create_engine(u)
        with engine.connect():
            pass
        engine.dispose()
    except Exception as exc:  # noqa: BLE001 - any driver's error becomes one line
        first = str(getattr(exc, "orig", None) or exc).strip().splitlines()
        raise ValueError(f"--storage {shown!r}: cannot connect ({first[0] if first else type(exc).__name__})") from None


def sampler_seed(seed: int, n_trials: int) -> int:
    """The TPE sampler's seed of a run that finds ``n_trials`` trials in its study: ``seed`` for a new study (the
    same seed, the same trials), else one derived from both (a continued study proposes new hyperparameters
    instead of replaying the first run's)."""
    if n_trials == 0:
        return int(seed)
    return int(np.random.SeedSequence([int(seed) & 0xFFFFFFFF, int(n_trials)]).generate_state(1)[0])


def study_name_of(cfg: TuneConfig) -> str:
    """The default study name (and record file stem): ``ENV-ALGO``, with ``-entity`` for the per-entity network."""
    return f"{cfg.env_id.split('/')[-1]}-{cfg.algo}" + ("" if cfg.net == "mlp" else f"-{cfg.net}")


def tune(cfg: TuneConfig, out: str, *, storage: str | None = None, study_name: str | None = None,
         progress: bool = True) -> dict:
    """Run ``cfg.trials`` trials of the study (module docstring); write ``out/tuning.json``; return the record.

    ``storage``: an Optuna storage URL shared by several tuning processes (default: ``sqlite:///`` in
    ``out``; an existing study of that name is continued)."""
    try:
        import optuna
    except ImportError as exc:  # pragma: no cover - the drl extra installs it
        raise ValueError("tuning needs Optuna: pip install 'clustergym[drl]'") from exc
    import gymnasium as gym

    if cfg.algo not in SEARCH_SPACE:
        raise ValueError(f"algo={cfg.algo!r} cannot be tuned: expected one of {', '.join(sorted(SEARCH_SPACE))}")
    gym.spec(cfg.env_id)  # an unknown id fails here, before anything runs
    if cfg.trials < 1 or cfg.timesteps < 1 or cfg.train_seeds < 1:
        raise ValueError("trials, timesteps and train_seeds must be >= 1")
    _check_instances(cfg.seeds if cfg.instances is None else cfg.instances)
    cfg.reference_agent()
    if cfg.horizon < 1:
        raise ValueError(f"horizon={cfg.horizon} is invalid: expected an integer >= 1")
    runs = len(cfg.seeds) * (1 if cfg.instances is None else len(cfg.instances))
    # a validation evaluation keeps 2 float64 curves of length horizon per run (4 while it runs), as evaluate counts
    check_memory(8.0 * cfg.horizon * (6 * runs + 4 * (cfg.n_envs or 4)), f"horizon={cfg.horizon}",
                 f"the per-slot curves of {runs} validation runs")
    storage_given = storage
    if storage is not None:
        check_storage(storage)
    name = study_name or study_name_of(cfg)
    held_rec = _held_record(out)
    if held_rec is not None:  # another run's record in ``out``: this run would replace it
        check_continuation(held_rec, cfg, name, out, "--out")
    created = not os.path.isdir(out)
    os.makedirs(out, exist_ok=True)
    storage = storage or f"sqlite:///{os.path.abspath(os.path.join(out, 'study.db'))}"
    if storage.startswith("sqlite:"):
        check_storage(storage)
    study = _open_study(cfg, name, storage, out, created=created, shared=storage_given is not None)
    held = len(study.get_trials(deepcopy=False))
    study.sampler = optuna.samplers.TPESampler(seed=sampler_seed(cfg.seed, held))
    try:
        ref, rnd = _reference_values(cfg, study)
        study.optimize(_objective(cfg, ref, rnd, progress), n_trials=cfg.trials, catch=())
    except Exception:
        if created and not any(t.state.name == "COMPLETE" for t in study.get_trials(deepcopy=False)):
            shutil.rmtree(out, ignore_errors=True)  # a folder this run made, holding nothing that counts
        raise
    except KeyboardInterrupt as exc:
        done = sum(t.state.name == "COMPLETE" for t in study.get_trials(deepcopy=False))
        if done:
            _write_record(record_of(study, cfg), out)
        what = "terminated" if str(exc) == "terminated" else "interrupted"
        raise KeyboardInterrupt(f"{what}; the study {name} holds {done} finished trial{'s' * (done != 1)} (kept: "
                                "they count; run the same command again to continue it)") from None
    rec = record_of(study, cfg)
    _write_record(rec, out)
    return rec


def _open_study(cfg: TuneConfig, name: str, storage: str, out: str, *, created: bool, shared: bool):
    """The study ``name`` in ``storage``, new or continued: a continued one's settings must be ``cfg``'s
    (:func:`check_continuation`); a new one keeps them. A refusal removes ``out`` if this run made it."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.ERROR)  # a stopped trial is reported in one line by tune
    try:
        study = optuna.create_study(study_name=name, storage=storage, direction="maximize", load_if_exists=True)
    except Exception as exc:  # noqa: BLE001 - the storage refused (checked above; a race or a server's rule)
        if created:
            shutil.rmtree(out, ignore_errors=True)
        first = str(exc).strip().splitlines()
        raise ValueError(f"--storage: cannot open the study ({first[0] if first else type(exc).__name__})") from None
    try:
        if "settings" in study.user_attrs:  # a continued study
            check_continuation(study.user_attrs["settings"], cfg, name, "--storage" if shared else out,
                               "--study" if shared else "--out")
        elif "reference_values" not in study.user_attrs:  # nothing computed yet: these are the study's settings
            study.set_user_attr("settings", settings_of(cfg, name))
    except ValueError:
        if created:
            shutil.rmtree(out, ignore_errors=True)
        raise
    return study


def _write_record(rec: dict, out: str) -> None:
    tmp = os.path.join(out, f".tuning.json.{os.getpid()}")  # several tuning processes may share ``out``
    with open(tmp, "w") as f:
        json.dump(rec, f, indent=1)
    os.replace(tmp, os.path.join(out, "tuning.json"))
