"""Warm start by behaviour cloning (BC): imitate a teacher agent, then fine-tune with PPO.

``clustergym train ENV --algo ppo|maskable_ppo --warm-start esdp --bc-steps N`` (``TrainConfig(...,
warm_start=...)``) does, before any PPO update:

1. **Demonstrations** (:func:`collect_demonstrations`). The teacher (any registered agent of the env's family, or
   ``"oracle"``: the family's per-slot oracle, ``drl_hooks.oracle_action``, which reads the hidden truth of the
   teacher's env; training only) plays ``bc_steps`` slots on the *training* env exactly as ``train`` builds it
   (``gym.make`` + Monitor + ``FlattenWithStats`` (+ ``RescaleBox``), the same padding kwargs, an instance drawn
   from the training pool at each seeded reset). The teacher acts as in ``clustergym run``: on an *unpadded* env
   of the same instance reset with the same seed (the pool env's dynamics are those of ``scenario_seed=k`` with
   the same reset seed: :func:`clustergym.core.env.instance_generator`), seeing the public problem, the
   observation and ``public_info`` (no metrics), and getting ``update`` with the feedback as the runner gives it.
   Both envs are stepped in lockstep; what is recorded is the training env's flat observation and the teacher's
   action mapped into the training env's action space (:func:`to_train_action`):

   * MultiBinary / MultiDiscrete: the same values, zero-padded to the padded length (P1's padding
     channels are 0, the only allowed value); P3 and P4 actions have the same shape padded or not;
   * Box (P2): on a padded env the action is a fraction of each channel's cap a_l^k (``box_bounds``), so
     y -> y / a_l^k (0 where a_l^k = 0), padding rows 0; then the affine map of ``RescaleBox`` inverted to
     [-1, 1] (entries with low == high -> -1, they carry no choice).

   The rewards of the two envs must agree at every slot (``reward_gap`` in the side-car; a gap above
   1e-6 relative is a RuntimeError): a wrong mapping cannot go unnoticed.
2. **Normalisation**: ``VecNormalize``'s observation statistics are fitted on the demonstration
   observations, and its return statistics on their running discounted returns (as ``VecNormalize``
   itself updates them), so PPO fine-tuning starts with the statistics the cloned policy was fitted with.
3. **Supervised loop** (:func:`behaviour_clone`), plain torch (Adam, minibatches, ``bc_epochs`` passes):

   * discrete actions: maximise the policy's own log-probability of the teacher's action
     (``policy.evaluate_actions``; with MaskablePPO the env's action masks are passed, so the loss is on
     the masked distribution the policy acts with; a teacher value outside the mask, which the env
     would repair, is allowed in the loss's mask so its log-probability stays finite, and counted as
     ``mask_violations`` in the side-car);
   * Box actions (P2): mean squared error between the Gaussian mean and the teacher's action in [-1, 1]
     (the deterministic action is the mean); ``log_std`` is not fitted and is set after cloning to
     ``log(BC_BOX_STD)`` (std 0.1 in [-1, 1] units, 5% of an entry's range): small enough that the first
     rollouts act like the clone, not 0 so PPO still explores (the default ``log_std_init`` 0 = std 1
     would turn the clone's actions into noise at the first rollout);
   * the value head is fitted at the same time (weight ``vf_coef``) to the discounted returns-to-go of
     the demonstrations' *normalised* rewards (the rewards PPO will see), so the first PPO update's
     advantages are not driven by an untrained critic.

Why not the ``imitation`` package: it pins its own SB3/gymnasium versions, has no notion of our action
masks or of the fast heads (:mod:`clustergym.learning.heads`), and would need its own rollout collection,
which cannot run the teacher on the unpadded env beside the padded one; the loop here is ~50 lines of torch
on the policy's own distribution.

Fine-tuning defaults (:data:`FINETUNE_HP`, overridable with ``--hp``): ``learning_rate`` 1e-4 (the file's
3e-4 / 3) and ``clip_range`` 0.1 (0.2 / 2), so the first updates stay close to the cloned policy.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import gymnasium as gym
import numpy as np

from clustergym.core.agent import list_agents, make, parse_agent_spec, public_info
from clustergym.core.env import env_padding
from clustergym.core.family import FAMILIES, env_family
from clustergym.learning.instances import pad_kwargs_of
from clustergym.learning.train_envs import make_train_env
from clustergym.learning.pipeline import sb3_mask

__all__ = ["Demonstrations", "collect_demonstrations", "to_train_action", "behaviour_clone", "warm_start",
           "FINETUNE_HP", "BC_BOX_STD", "WARM_ALGOS"]

FINETUNE_HP = {"learning_rate": 1e-4, "clip_range": 0.1}
BC_BOX_STD = 0.1
WARM_ALGOS = ("ppo", "maskable_ppo")
REWARD_RTOL = 1e-6


@dataclass
class Demonstrations:
    """The teacher's decisions on the training env (arrays of one row per slot)."""

    obs: np.ndarray  # (N, d) float32: the training env's flat observation (before VecNormalize)
    actions: np.ndarray  # (N, ...) float32: the teacher's action in the training env's action space
    rewards: np.ndarray  # (N,) float64
    starts: np.ndarray  # (N,) bool: first slot of an episode
    masks: np.ndarray | None  # (N, m) bool (MaskablePPO's flat mask) or None
    instances: list = field(default_factory=list)  # the instance of each episode
    reward_gap: float = 0.0  # max |reward(train env) - reward(teacher's env)| (the mapping check)
    mask_violations: int = 0  # teacher action entries outside the mask (the env repairs them)


def to_train_action(action, ref_env: gym.Env, train_env: gym.Env) -> np.ndarray:
    """The teacher's action on the unpadded ``ref_env`` as the action of the (wrapped) training env that
    executes the same decision (module docstring: padding, fractions of a_l^k, [-1, 1])."""
    target = train_env.unwrapped.action_space  # before RescaleBox
    padded = bool(env_padding(train_env))
    ref_shape = ref_env.unwrapped.action_space.shape
    if np.asarray(action).size != int(np.prod(ref_shape)):
        raise ValueError(f"the teacher's action has {np.asarray(action).size} entries, the env's action_mode="
                         f"{getattr(train_env.unwrapped, 'action_mode', None)!r} expects {int(np.prod(ref_shape))}: a "
                         "warm start needs the action the teacher acts in (e.g. --set action_mode=channel on P2)")
    if isinstance(target, gym.spaces.Box):
        y = np.asarray(action, dtype=np.float64).reshape(ref_shape)
        if padded:  # fractions of the cap a_l^k (P2's box_bounds on a padded env)
            _, cap = ref_env.unwrapped.action_bounds()
            y = np.divide(y, cap, out=np.zeros_like(y), where=cap > 0)
        x = np.zeros(target.shape)
        x[tuple(slice(0, n) for n in y.shape)] = y
        w = _wrapper(train_env, "RescaleBox")
        if w is not None:  # RescaleBox maps [min, max] affinely onto [low, high]: invert it
            lo, hi = w._low, w._high
            span = hi - lo
            u = np.divide(x - lo, span, out=np.zeros_like(x), where=span > 0)
            x = np.clip(np.where(span > 0, w._min + u * (w._max - w._min), w._min), w._min, w._max)
        return x.astype(np.float32)
    a = np.asarray(action)
    a = a.astype(np.int64).reshape(ref_env.unwrapped.action_space.shape)
    out = np.zeros(target.shape, dtype=np.int64)
    out[tuple(slice(0, n) for n in a.shape)] = a
    return out


def _wrapper(env: gym.Env, name: str):
    """The wrapper of class ``name`` in ``env``'s chain, or None."""
    while isinstance(env, gym.Wrapper):
        if type(env).__name__ == name:
            return env
        env = env.env
    return None


ORACLE_TEACHER = "oracle"  # the family's per-slot oracle (drl_hooks.oracle_action): a teacher in training only


def _check_teacher(teacher: str, family: str):
    """The teacher agent: any agent of the family (not a saved model); None for :data:`ORACLE_TEACHER`, whose
    decisions read the hidden truth of the teacher's env (the family's ``drl_hooks.oracle_action``)."""
    if teacher == ORACLE_TEACHER:
        if FAMILIES[family].hook("oracle_action") is None:
            raise ValueError(f"warm_start='oracle': the {family} family has no per-slot oracle teacher "
                             "(drl_hooks.oracle_action)")
        return None
    if not isinstance(teacher, str) or teacher.startswith("sb3:"):
        raise ValueError(f"warm_start={teacher!r} is invalid: expected an agent name of the {family} family "
                         f"({', '.join(list_agents(family=family))})")
    name, _ = parse_agent_spec(teacher)
    if name not in list_agents(family=family) and ":" not in name:
        raise ValueError(f"warm_start={teacher!r} is invalid: expected an agent of the {family} family "
                         f"({', '.join(list_agents(family=family))})")
    return make(teacher, family=family)


def collect_demonstrations(env_id: str, train_kwargs: dict, teacher: str, steps: int, *, seed: int = 0,
                           stats: bool = True, algo: str = "ppo", layout: str = "full",
                           time_cap: float | None = None) -> Demonstrations:
    """``steps`` slots of ``teacher`` on the training env of ``train_kwargs`` (module docstring, step 1).

    Episode i is reset with seed ``seed + i`` (the teacher's ``reset`` gets the same seed, as in the runner)."""
    family = env_family(env_id)
    agent = _check_teacher(teacher, family)
    oracle = FAMILIES[family].hook("oracle_action") if agent is None else None
    env = make_train_env(env_id, train_kwargs, algo=algo, stats=stats, layout=layout, time_cap=time_cap)
    drop = set(pad_kwargs_of(env_id)) | {"instances", "scenario_seed"}
    base_kw = {k: v for k, v in train_kwargs.items() if k not in drop}
    refs: dict = {}
    obs_l, act_l, rew_l, start_l, mask_l, inst = [], [], [], [], [], []
    gap, violations, n, ep = 0.0, 0, 0, 0
    masked = algo == "maskable_ppo"
    try:
        while n < steps:
            s = int(seed) + ep
            x, info = env.reset(seed=s)
            k = env.unwrapped.scenario_seed
            ref = refs.get(k)
            if ref is None:
                kw = dict(base_kw) if k is None else {**base_kw, "scenario_seed": int(k)}
                ref = refs[k] = gym.make(env_id, **kw, oracle=False)
            obs, rinfo = ref.reset(seed=s)
            if agent is not None:
                agent.reset(ref.unwrapped.problem, seed=s)
            inst.append(None if k is None else int(k))
            first = True
            while n < steps:
                a = oracle(ref.unwrapped) if agent is None else agent.act(obs, public_info(rinfo))
                a_train = to_train_action(a, ref, env)
                obs_l.append(np.asarray(x, dtype=np.float32))
                act_l.append(a_train.astype(np.float32))
                start_l.append(first)
                first = False
                if masked:
                    m = sb3_mask(family, public_info(info)).astype(bool)
                    mask_l.append(m)
                    chosen = m.reshape(-1, m.size // a_train.size)[np.arange(a_train.size), a_train.reshape(-1)]
                    violations += int((~chosen).sum())
                x, r_train, term, trunc, info = env.step(a_train)
                obs2, r, term2, trunc2, rinfo2 = ref.step(a)
                if agent is not None:
                    agent.update(obs, a, r, obs2, public_info(rinfo2))
                g = abs(float(r_train) - float(r))
                gap = max(gap, g)
                if g > REWARD_RTOL * max(1.0, abs(float(r))) or (term, trunc) != (term2, trunc2):
                    raise RuntimeError(f"warm start: the teacher's action mapped into the training env gives reward "
                                       f"{r_train} where the teacher's env gives {r} (slot {n}, instance {k}): the "
                                       f"action mapping is wrong for {env_id}")
                rew_l.append(float(r))
                obs, rinfo = obs2, rinfo2
                n += 1
                if term or trunc:
                    break
            ep += 1
    finally:
        env.close()
        for r in refs.values():
            r.close()
    return Demonstrations(obs=np.stack(obs_l), actions=np.stack(act_l), rewards=np.asarray(rew_l),
                          starts=np.asarray(start_l, dtype=bool), masks=np.stack(mask_l) if masked else None,
                          instances=inst, reward_gap=gap, mask_violations=violations)


def _allow_targets(masks: np.ndarray, actions: np.ndarray) -> np.ndarray:
    """The masks for the loss: a teacher value outside the mask (the env repairs it; counted as
    ``mask_violations``) is allowed there, so its log-probability stays finite (masked-out values have
    logit -1e8). Masks with the same number of values per dimension (P1, P4) only."""
    n = masks.shape[0]
    a = actions.reshape(n, -1).astype(np.int64)
    if masks.shape[1] % a.shape[1]:
        return masks
    m = masks.reshape(n, a.shape[1], -1).copy()
    np.put_along_axis(m, a[:, :, None], True, axis=2)
    return m.reshape(n, -1)


def _returns_to_go(r: np.ndarray, starts: np.ndarray, gamma: float) -> np.ndarray:
    out = np.zeros_like(r)
    acc = 0.0
    for i in range(r.size - 1, -1, -1):
        acc = r[i] + gamma * acc
        out[i] = acc
        if starts[i]:
            acc = 0.0
    return out


def _fit_normalization(venv, demos: Demonstrations, gamma: float) -> np.ndarray:
    """Fit ``venv`` (a VecNormalize) on the demonstrations; the rewards as PPO will see them."""
    if venv.norm_obs:  # off for the entity net (its features are in [0, 1])
        venv.obs_rms.update(demos.obs.astype(np.float64))
    run = np.zeros_like(demos.rewards)
    acc = 0.0
    for i, r in enumerate(demos.rewards):  # VecNormalize's running discounted return (reset at episode starts)
        acc = r if demos.starts[i] else acc * gamma + r
        run[i] = acc
    venv.ret_rms.update(run)
    return np.clip(demos.rewards / np.sqrt(venv.ret_rms.var + venv.epsilon), -venv.clip_reward, venv.clip_reward)


def behaviour_clone(model, demos: Demonstrations, venv=None, *, epochs: int = 30, batch_size: int = 256,
                    lr: float = 1e-3, vf_coef: float = 0.5, seed: int = 0) -> dict:
    """Fit ``model.policy`` to the demonstrations (module docstring, steps 2-3); returns the BC record."""
    import torch as th

    t0 = time.perf_counter()
    gamma = float(getattr(model, "gamma", 0.99))
    if venv is not None:
        rewards = _fit_normalization(venv, demos, gamma)
        obs = venv.normalize_obs(demos.obs).astype(np.float32)
    else:
        rewards, obs = demos.rewards, demos.obs
    targets = _returns_to_go(rewards, demos.starts, gamma).astype(np.float32)
    policy = model.policy
    box = isinstance(model.action_space, gym.spaces.Box)
    th.manual_seed(int(seed))
    rng = np.random.default_rng(int(seed))
    obs_t, act_t = th.as_tensor(obs), th.as_tensor(demos.actions)
    ret_t = th.as_tensor(targets)
    mask_t = None if demos.masks is None else th.as_tensor(_allow_targets(demos.masks, demos.actions))
    params = [p for name, p in policy.named_parameters() if name != "log_std"]
    opt = th.optim.Adam(params, lr=float(lr))
    policy.set_training_mode(True)
    n = obs.shape[0]
    history = []

    def losses(idx):
        o, a = obs_t[idx], act_t[idx]
        if box:
            dist = policy.get_distribution(o)
            pi = ((dist.distribution.mean - a.reshape(len(idx), -1)) ** 2).mean()
            v = policy.predict_values(o).flatten()
        else:
            kw = {} if mask_t is None else {"action_masks": mask_t[idx]}
            v, logp, _ = policy.evaluate_actions(o, a.reshape(len(idx), -1), **kw)
            pi = -logp.mean()
            v = v.flatten()
        return pi, ((v - ret_t[idx]) ** 2).mean()

    for _ in range(int(epochs)):
        perm = rng.permutation(n)
        tot_pi = tot_v = 0.0
        for i in range(0, n, batch_size):
            idx = th.as_tensor(perm[i:i + batch_size])
            pi, vl = losses(idx)
            loss = pi + vf_coef * vl
            opt.zero_grad()
            loss.backward()
            opt.step()
            tot_pi += float(pi.detach()) * len(idx)
            tot_v += float(vl.detach()) * len(idx)
        history.append((tot_pi / n, tot_v / n))
    policy.set_training_mode(False)
    if box:
        with th.no_grad():
            policy.log_std.fill_(math.log(BC_BOX_STD))
    with th.no_grad():  # the clone's deterministic actions on the demonstrations
        kw = {} if mask_t is None else {"action_masks": demos.masks}
        pred = np.asarray(policy.predict(obs, deterministic=True, **kw)[0], dtype=np.float64).reshape(n, -1)
    target = demos.actions.reshape(n, -1).astype(np.float64)
    rec = {"loss": "mse of the Gaussian mean" if box else "negative log-likelihood (sum over action dimensions)",
           "loss_history": [round(p, 6) for p, _ in history], "value_loss_history": [round(v, 6) for _, v in history],
           "final_loss": history[-1][0] if history else None}
    if box:
        rec["mse_deterministic"] = float(((pred - target) ** 2).mean())
        rec["log_std_after"] = math.log(BC_BOX_STD)
    else:
        rec["accuracy_per_dim"] = float((pred == target).mean())
        rec["accuracy_per_slot"] = float((pred == target).all(axis=1).mean())
        nz = target != 0  # the teacher's non-zero entries (P3: placements; most entries of most slots are 0)
        rec["accuracy_nonzero"] = float((pred == target)[nz].mean()) if nz.any() else None
    rec["bc_fit_wall_s"] = time.perf_counter() - t0
    return rec


def warm_start(model, venv, env_id: str, train_kwargs: dict, teacher: str, *, steps: int, epochs: int, seed: int = 0,
               stats: bool = True, algo: str = "ppo", batch_size: int = 256, lr: float = 1e-3,
               layout: str = "full", time_cap: float | None = None) -> dict:
    """Demonstrations + normalisation fit + BC (module docstring); the side-car's ``warm_start`` record."""
    t0 = time.perf_counter()
    demos = collect_demonstrations(env_id, train_kwargs, teacher, steps, seed=seed, stats=stats, algo=algo,
                                   layout=layout, time_cap=time_cap)
    t1 = time.perf_counter()
    rec = behaviour_clone(model, demos, venv, epochs=epochs, batch_size=batch_size, lr=lr, seed=seed)
    eps = [k for k in demos.instances]
    return {"teacher": teacher, "demo_steps": int(demos.obs.shape[0]), "demo_episodes": len(eps),
            "demo_instances": sorted(set(k for k in eps if k is not None)), "demo_seeds": f"{seed}-{seed + len(eps) - 1}",
            "reward_gap": demos.reward_gap, "mask_violations": demos.mask_violations, "epochs": int(epochs),
            "batch_size": int(batch_size), "bc_lr": float(lr), **rec, "demo_wall_s": t1 - t0,
            "bc_wall_s": time.perf_counter() - t0}
