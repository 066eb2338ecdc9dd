"""Contract checkers for environments and agents, shipped in the package (as PettingZoo ships
``pettingzoo.test``), so the test suite, a new family and a user's own env or agent run the same checks.

    from clustergym.runner.testing import check_env, check_agent
    check_env("clustergym/MultiServerChannel-v0", env_kwargs={"num_servers": 12})
    check_agent("esdp", "clustergym/MultiServerChannel-v0", env_kwargs={"num_servers": 12})

Every check raises ``AssertionError`` (or the checker's own error) on a broken contract and returns None.
The contracts are the env conventions, the agent protocol and the reliability rules of
docs/architecture.md (Reliability):

* :func:`check_env` runs all the env checks below: Gymnasium's ``check_env`` and, when installed,
  Stable-Baselines3's; same seed -> identical trajectory (obs, rewards, flags, infos) over ``steps``
  steps and a different seed -> a different one; pickle and deepcopy continue identically;
  ``truncated=True`` exactly at the horizon; invalid actions -> ``ValueError`` with no change of state;
  every step's info has ``feedback`` and ``metrics``; rendering; kwarg validation.
* :func:`check_agent`: under ``infeasible="raise"`` the agent's actions are feasible for ``steps`` steps
  (no ValueError, nothing repaired), it never reads ``info["metrics"]`` (it gets an info whose
  ``"metrics"`` raises on access), and the same seed gives the same actions.

An env is given as a registered id (built with ``gym.make(id, **env_kwargs)``), as an env object (each
check works on deep copies of it) or as a zero-argument callable returning a fresh env. The checks that
need other constructor kwargs (a short horizon, render modes, bad kwargs) build them from an id only;
for an object or a callable they use its own horizon and skip render/kwargs checks.
"""

from __future__ import annotations

import copy
import pickle
from typing import Any, Callable

import gymnasium as gym
import numpy as np

from clustergym.core.agent import make, public_info

__all__ = ["check_env", "check_agent", "check_gymnasium_api", "check_sb3_api", "check_determinism",
           "check_copy_continues", "check_truncation", "check_invalid_actions", "check_info_keys",
           "check_render", "check_bad_kwargs", "check_agent_feasible",
           "check_agent_deterministic", "deep_equal", "rollout", "valid_random_action", "GuardedInfo"]

# -- helpers -------------------------------------------------------------------------------------
def deep_equal(a, b) -> bool:
    """Exact equality of nested dicts / lists / tuples / arrays (shape, dtype and values)."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(deep_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(deep_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b)
    return a == b


def valid_random_action(env, info, rng=None):
    """A random action of ``env.action_space``; for masked envs, only allowed entries are set."""
    space = env.action_space
    a = space.sample()
    mask = info.get("action_mask")
    if mask is not None and np.shape(mask) == np.shape(a):
        a = np.where(mask, a, 0).astype(a.dtype)
    return a


def rollout(env, seed: int, steps: int, action_seed: int = 0) -> list:
    """``steps`` steps of random valid actions from ``reset(seed)``: [(obs, info), (obs, r, term, trunc, info),
    ...], resetting (without a seed) after an episode end."""
    rng = np.random.default_rng(action_seed)
    env.action_space.seed(action_seed)
    obs, info = env.reset(seed=seed)
    traj = [(obs, info)]
    for _ in range(steps):
        a = valid_random_action(env, info, rng)
        obs, r, term, trunc, info = env.step(a)
        traj.append((obs, r, term, trunc, info))
        if term or trunc:
            obs, info = env.reset()
            traj.append((obs, info))
    return traj


def _factory(env: Any, env_kwargs: dict | None) -> Callable[..., gym.Env]:
    """``make(**overrides)`` building a fresh env (overrides only for an env id)."""
    if isinstance(env, str):
        base = dict(env_kwargs or {})
        return lambda **kw: gym.make(env, **{**base, **kw})
    if isinstance(env, gym.Env):  # the checks need several independent envs: deep copies of this one
        proto = copy.deepcopy(env)
        env = lambda: copy.deepcopy(proto)  # noqa: E731
    elif not callable(env):
        raise TypeError(f"expected an env id or a callable, got {type(env).__name__}")

    def make(**kw):
        if kw:
            raise TypeError(f"this check needs env kwargs {sorted(kw)}: pass an env id instead of a callable")
        return env()
    return make


def _name(env: Any) -> str:
    return env if isinstance(env, str) else getattr(env, "__name__", repr(env))


# -- env checks ----------------------------------------------------------------------------------
def check_gymnasium_api(env: Any, env_kwargs: dict | None = None, horizon: int = 50) -> None:
    """Gymnasium's ``check_env`` on the unwrapped env (render checked by :func:`check_render`)."""
    from gymnasium.utils.env_checker import check_env as gym_check_env

    e = _factory(env, env_kwargs)(**({"horizon": horizon} if isinstance(env, str) else {}))
    gym_check_env(e.unwrapped, skip_render_check=True)


def check_sb3_api(env: Any, env_kwargs: dict | None = None, horizon: int = 50) -> bool:
    """Stable-Baselines3's ``check_env`` (warnings allowed) when SB3 is installed; returns whether it ran."""
    try:
        from stable_baselines3.common.env_checker import check_env as sb3_check_env
    except ImportError:
        return False
    e = _factory(env, env_kwargs)(**({"horizon": horizon} if isinstance(env, str) else {}))
    sb3_check_env(e.unwrapped, warn=True)
    return True


def check_determinism(env: Any, env_kwargs: dict | None = None, steps: int = 200, seed: int = 7,
                      other_seed: int | None = 8, horizon: int | None = None) -> None:
    """Same seed -> the same trajectory (obs, rewards, flags, infos; exact equality) over ``steps`` steps;
    ``other_seed`` (unless None) -> a different trajectory within ``min(steps, 200)`` steps, or, for an env
    whose ``reset_seed_changes_episode`` is False (its episode is a function of its instance), the same one."""
    make = _factory(env, env_kwargs)
    kw = {"horizon": horizon} if horizon is not None and isinstance(env, str) else {}
    a = rollout(make(**kw), seed=seed, steps=steps)
    b = rollout(make(**kw), seed=seed, steps=steps)
    assert len(a) == len(b) >= steps + 1, f"{_name(env)}: rollouts of different lengths"
    for i, (x, y) in enumerate(zip(a, b)):
        assert deep_equal(x, y), f"{_name(env)}: same seed {seed}, different trajectories at entry {i}"
    if other_seed is not None:
        n = min(steps, 200)
        env_c = make(**kw)
        c = rollout(env_c, seed=other_seed, steps=n)
        same = all(deep_equal(x, y) for x, y in zip(a[:n + 1], c))
        if getattr(getattr(env_c, "unwrapped", env_c), "reset_seed_changes_episode", True):
            assert not same, f"{_name(env)}: seeds {seed} and {other_seed} gave the same trajectory (is the seed used?)"
        else:
            assert same, (f"{_name(env)}: seeds {seed} and {other_seed} gave different trajectories, but the env "
                          "declares that its episode is a function of its instance (seed_drives_dynamics=False)")


def check_copy_continues(env: Any, env_kwargs: dict | None = None, how: str = "pickle", warmup: int = 20,
                         steps: int = 50, horizon: int | None = 300) -> None:
    """A pickled (``how="pickle"``) or deep-copied (``"deepcopy"``) env continues exactly as the original."""
    make = _factory(env, env_kwargs)
    e = make(**({"horizon": horizon} if horizon is not None and isinstance(env, str) else {})).unwrapped
    rollout(e, seed=3, steps=warmup)
    clone = pickle.loads(pickle.dumps(e)) if how == "pickle" else copy.deepcopy(e)
    e.action_space.seed(5)
    clone.action_space.seed(5)
    for i in range(steps):
        s1, s2 = e.step(e.action_space.sample()), clone.step(clone.action_space.sample())
        assert deep_equal(list(s1), list(s2)), f"{_name(env)}: the {how} copy diverged at step {i}"
        if s1[2] or s1[3]:
            break


def check_truncation(env: Any, env_kwargs: dict | None = None, horizon: int = 5) -> None:
    """``truncated`` is False for the first horizon-1 steps and True at step ``horizon`` (random actions)."""
    e = _factory(env, env_kwargs)(**({"horizon": horizon} if isinstance(env, str) else {}))
    horizon = int(e.unwrapped.horizon) if not isinstance(env, str) else horizon
    e.reset(seed=0)
    e.action_space.seed(0)
    flags = [e.step(e.action_space.sample())[3] for _ in range(horizon)]
    assert flags == [False] * (horizon - 1) + [True], f"{_name(env)}: truncated flags {flags}, expected True at {horizon}"


def _bad_actions(space: gym.Space) -> list[tuple[str, Any]]:
    """Actions every env must refuse with ValueError: wrong shape, NaN, a non-numeric dtype."""
    shape = space.shape or ()
    out = [("wrong shape", np.zeros((*shape, 2), dtype=np.float64)),
           ("NaN", np.full(shape, np.nan)),
           ("strings", np.full(shape, "x"))]
    if len(shape) >= 1:
        out.append(("one entry short", np.zeros((shape[0] - 1, *shape[1:]), dtype=np.int64)))
    return out


def check_invalid_actions(env: Any, env_kwargs: dict | None = None, warmup: int = 5, horizon: int | None = 100) -> None:
    """Wrong shape, NaN and non-numeric actions raise ValueError, and the env's state does not change: the env
    then continues exactly as a deep copy taken before the bad action."""
    make = _factory(env, env_kwargs)
    e = make(**({"horizon": horizon} if horizon is not None and isinstance(env, str) else {})).unwrapped
    rollout(e, seed=1, steps=warmup)
    before = copy.deepcopy(e)
    for what, bad in _bad_actions(e.action_space):
        try:
            e.step(bad)
        except ValueError:
            pass
        else:
            raise AssertionError(f"{_name(env)}: an action with {what} was accepted (expected ValueError)")
    e.action_space.seed(9)
    before.action_space.seed(9)
    for i in range(5):
        s1, s2 = e.step(e.action_space.sample()), before.step(before.action_space.sample())
        assert deep_equal(list(s1), list(s2)), f"{_name(env)}: a rejected action changed the state (step {i} after)"


def check_info_keys(env: Any, env_kwargs: dict | None = None, steps: int = 10, horizon: int | None = 50) -> None:
    """Every step's info holds ``feedback`` (what a scheduler observes) and ``metrics`` (evaluation only),
    both dicts."""
    make = _factory(env, env_kwargs)
    e = make(**({"horizon": horizon} if horizon is not None and isinstance(env, str) else {}))
    traj = rollout(e, seed=0, steps=steps)
    for i, entry in enumerate(traj):
        if len(entry) == 5:
            info = entry[4]
            for key in ("feedback", "metrics"):
                assert isinstance(info.get(key), dict), f"{_name(env)}: step {i}: info[{key!r}] missing or not a dict"


def check_render(env: Any, env_kwargs: dict | None = None) -> None:
    """``render_mode="ansi"`` gives a text with ``slot`` in it; ``"rgb_array"`` a non-blank uint8 RGB image."""
    make = _factory(env, env_kwargs)
    e = make(horizon=20, render_mode="ansi")
    e.reset(seed=0)
    e.step(e.action_space.sample())
    text = e.render()
    assert isinstance(text, str) and "slot" in text, f"{_name(env)}: ansi render gave {text!r}"
    e = make(horizon=20, render_mode="rgb_array")
    e.reset(seed=0)
    img = e.render()
    assert img.ndim == 3 and img.shape[2] == 3 and img.dtype == np.uint8 and img.std() > 0, \
        f"{_name(env)}: rgb_array render is not a non-blank RGB uint8 image"


def check_bad_kwargs(env: Any, env_kwargs: dict | None = None) -> None:
    """Invalid common kwargs fail at construction with a ValueError naming the parameter."""
    make = _factory(env, env_kwargs)
    for key, val in (("horizon", 0), ("infeasible", "ignore"), ("render_mode", "bogus")):
        try:
            make(**{key: val})
        except ValueError as exc:
            assert key in str(exc), f"{_name(env)}: {key}={val!r} raised ValueError without naming {key!r}: {exc}"
        else:
            raise AssertionError(f"{_name(env)}: {key}={val!r} was accepted (expected ValueError)")


def check_env(env: Any, env_kwargs: dict | None = None, *, steps: int = 100, sb3: bool = True,
              render: bool = True) -> None:
    """Every env check of this module on ``env`` (an id, an env object or a zero-argument callable returning a
    fresh env; the checks that need other kwargs — render modes, bad kwargs — run only for an id)."""
    is_id = isinstance(env, str)
    check_gymnasium_api(env, env_kwargs)
    if sb3:
        check_sb3_api(env, env_kwargs)
    check_determinism(env, env_kwargs, steps=steps, horizon=steps + 50 if is_id else None)
    for how in ("pickle", "deepcopy"):
        check_copy_continues(env, env_kwargs, how=how)
    check_truncation(env, env_kwargs)
    check_invalid_actions(env, env_kwargs)
    check_info_keys(env, env_kwargs)
    if is_id:
        if render:
            check_render(env, env_kwargs)
        check_bad_kwargs(env, env_kwargs)


# -- agent checks --------------------------------------------------------------------------------
class GuardedInfo(dict):
    """An agent's info: ``info`` without ``"metrics"``; any attempt to read ``"metrics"`` raises
    AssertionError (so an agent that peeks at evaluation-only quantities fails loudly)."""

    def _deny(self, key):
        if key == "metrics":
            raise AssertionError("the agent read info['metrics'] (evaluation only; agents get public info)")

    def __getitem__(self, key):
        self._deny(key)
        return super().__getitem__(key)

    def get(self, key, default=None):
        self._deny(key)
        return super().get(key, default)

    def __contains__(self, key):
        self._deny(key)
        return super().__contains__(key)


def _guarded(info: dict) -> GuardedInfo:
    return GuardedInfo(public_info(info))


def _make_agent(agent: Any, env_id: str):
    if isinstance(agent, str):
        return make(agent, env_id=env_id)
    return copy.deepcopy(agent)


def _agent_episode(agent: Any, env_id: str, env_kwargs: dict | None, steps: int, seed: int) -> tuple[list, list]:
    """Actions and rewards of the agent under ``infeasible="raise"``, with guarded infos."""
    env = gym.make(env_id, **{**(env_kwargs or {}), "infeasible": "raise", "horizon": steps})
    ag = _make_agent(agent, env_id)
    obs, info = env.reset(seed=seed)
    ag.reset(env.unwrapped.problem, seed=seed)
    actions, rewards = [], []
    for t in range(steps):
        a = ag.act(obs, _guarded(info))
        actions.append(copy.deepcopy(np.asarray(a)))
        try:
            nxt, r, term, trunc, info = env.step(a)
        except ValueError as exc:
            raise AssertionError(f"agent {agent!r} on {env_id}: infeasible action at step {t} "
                                 f"(infeasible='raise'): {exc}") from None
        repaired = info.get("metrics", {}).get("repaired", 0)
        assert not repaired, f"agent {agent!r} on {env_id}: step {t} needed {repaired} repair(s)"
        ag.update(obs, a, r, nxt, _guarded(info))
        rewards.append(r)
        obs = nxt
        if term or trunc:
            break
    return actions, rewards


def check_agent_feasible(agent: Any, env_id: str, env_kwargs: dict | None = None, steps: int = 30,
                         seed: int = 0) -> None:
    """The agent's actions are feasible (no ValueError under ``infeasible="raise"``, nothing repaired) and it
    never reads ``info["metrics"]`` (it gets a :class:`GuardedInfo`) for ``steps`` steps."""
    _agent_episode(agent, env_id, env_kwargs, steps, seed)


def check_agent_deterministic(agent: Any, env_id: str, env_kwargs: dict | None = None, steps: int = 30,
                              seed: int = 0) -> None:
    """Two fresh agents with the same seed on the same env seed act identically (and get the same rewards)."""
    a1, r1 = _agent_episode(agent, env_id, env_kwargs, steps, seed)
    a2, r2 = _agent_episode(agent, env_id, env_kwargs, steps, seed)
    assert len(a1) == len(a2), f"agent {agent!r}: episodes of different lengths"
    for t, (x, y) in enumerate(zip(a1, a2)):
        assert deep_equal(x, y), f"agent {agent!r} on {env_id}: same seed, different action at step {t}"
    assert r1 == r2, f"agent {agent!r} on {env_id}: same seed, different rewards"


def check_agent(agent: Any, env_id: str, env_kwargs: dict | None = None, *, steps: int = 30, seed: int = 0) -> None:
    """Every agent check: feasible under ``infeasible="raise"``, never sees metrics, same seed -> same actions.

    ``agent`` is a registered name (options allowed: ``"esdp[only_active=true]"``), ``pkg.module:Class``,
    or an agent object (deep-copied for each run).
    """
    check_agent_deterministic(agent, env_id, env_kwargs, steps=steps, seed=seed)

