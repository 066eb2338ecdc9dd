"""Plain Stable-Baselines3 on the default envs, as a new user writes it: the default observation goes to SB3's
``MultiInputPolicy`` and to ``FlattenObservation`` as is, a model trained that way (with or without
``VecNormalize``) becomes an ``sb3:`` agent through ``clustergym import-model``, and the public fast-head
policies train on the default action spaces."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

pytest.importorskip("stable_baselines3")

import gymnasium as gym  # noqa: E402
import torch  # noqa: E402

import clustergym  # noqa: E402
from clustergym.cli.main import main  # noqa: E402
from tests.helpers import one_line_exit_2  # noqa: E402

torch.set_num_threads(1)
P1, P2, P3, P4 = clustergym.ENV_IDS


def _leaves(space, name=""):
    if isinstance(space, gym.spaces.Dict):
        for k, s in space.spaces.items():
            yield from _leaves(s, f"{name}/{k}")
    else:
        yield name, space


def _multi_dim_multidiscrete(space) -> list[str]:
    return [n for n, s in _leaves(space) if isinstance(s, gym.spaces.MultiDiscrete) and np.asarray(s.nvec).ndim > 1]


@pytest.mark.parametrize("env_id", clustergym.ENV_IDS)
def test_default_observation_has_only_spaces_standard_policies_take(env_id):
    from clustergym.envs.multiagent import parallel_env, parallel_env_ids
    from stable_baselines3.common.preprocessing import get_flattened_obs_dim, preprocess_obs

    env = gym.make(env_id)
    assert _multi_dim_multidiscrete(env.observation_space) == []
    # every key's preprocessed tensor has the size SB3's extractor is built for
    obs, _ = env.reset(seed=0)
    for k, sp in env.observation_space.spaces.items():
        x = torch.as_tensor(np.asarray(obs[k])[None])
        assert preprocess_obs(x, sp).reshape(1, -1).shape[1] == get_flattened_obs_dim(sp), k
    flat = gym.wrappers.FlattenObservation(env)
    assert flat.observation_space.shape[0] == flat.reset(seed=0)[0].shape[0]
    vec_kw = {"action_mode": "ring_size"} if env_id == P3 else {}  # the native P3 vector env's only action mode
    venv = gym.make_vec(env_id, num_envs=2, vectorization_mode="vector_entry_point", **vec_kw)
    assert _multi_dim_multidiscrete(venv.single_observation_space) == []
    venv.close()
    if env_id in parallel_env_ids():
        penv = parallel_env(env_id)
        assert all(_multi_dim_multidiscrete(penv.observation_space(a)) == [] for a in penv.possible_agents)
    env.close()


def _rollout_actions(model, env_id, seed, steps, normalize=None):
    """The model's own deterministic actions on the env's own rollout (what the sb3: agent must reproduce)."""
    env = gym.make(env_id, horizon=steps + 1, scenario_seed=0)
    obs, _ = env.reset(seed=seed)
    acts = []
    for _ in range(steps):
        a, _ = model.predict(normalize(obs) if normalize else obs, deterministic=True)
        acts.append(np.asarray(a).copy())
        obs, *_ = env.step(a)
    return acts


def _agent_actions(folder, env_id, seed, steps):
    from clustergym.core.agent import make

    agent = make(f"sb3:{folder}", env_id=env_id)
    env = gym.make(env_id, horizon=steps + 1, scenario_seed=0)
    obs, info = env.reset(seed=seed)
    agent.reset(env.unwrapped.problem, seed=seed)
    acts = []
    for _ in range(steps):
        a = agent.act(obs, info)
        acts.append(np.asarray(a).copy())
        nxt, r, term, trunc, info = env.step(a)
        agent.update(obs, a, r, nxt, info)
        obs = nxt
    return acts


@pytest.mark.parametrize("env_id", clustergym.ENV_IDS)
def test_plain_multi_input_ppo_trains_imports_and_runs_on_every_env(env_id, tmp_path, capsys):
    """PPO("MultiInputPolicy", gym.make(id)) with default kwargs: two short rollouts and updates, saved, imported,
    run."""
    from stable_baselines3 import PPO

    model = PPO("MultiInputPolicy", gym.make(env_id), n_steps=16, batch_size=16, n_epochs=1, seed=0, device="cpu")
    model.learn(32)
    model.save(tmp_path / "ppo.zip")
    imp = tmp_path / "imported"
    assert main(["import-model", str(tmp_path / "ppo.zip"), "--env", env_id, "--out", str(imp)]) == 0
    assert "the env's Dict" in capsys.readouterr().out
    meta = json.loads((imp / "clustergym.json").read_text())
    assert meta["obs"] == "dict" and not meta["normalize"]
    got, want = _agent_actions(imp, env_id, 3, 4), _rollout_actions(model, env_id, 3, 4)
    assert all(np.array_equal(a, b) for a, b in zip(got, want))
    res = tmp_path / "res"
    assert main(["run", env_id, "--agents", f"sb3:{imp},random", "--seeds", "0-1", "--horizon", "8", "--out", str(res),
                 "--no-plots", "--no-progress", "--no-score"]) == 0
    runs = json.loads((res / "results.json").read_text())["runs"]
    assert len([r for r in runs if r["agent"] == f"sb3:{imp}"]) == 2


def test_imported_multi_input_model_runs_against_the_best_baseline_on_several_instances(tmp_path, capsys):
    from stable_baselines3 import PPO

    model = PPO("MultiInputPolicy", gym.make(P4), n_steps=64, batch_size=64, n_epochs=1, seed=0, device="cpu")
    model.learn(128)
    model.save(tmp_path / "ppo_p4.zip")
    imp = tmp_path / "p4"
    assert main(["import-model", str(tmp_path / "ppo_p4.zip"), "--env", P4, "--out", str(imp)]) == 0
    for inst in (0, 1, 2):  # P4's spaces do not depend on the instance: the model acts on others too
        res = tmp_path / f"res{inst}"
        assert main(["run", P4, "--agents", f"sb3:{imp},fair", "--set", f"scenario_seed={inst}", "--seeds", "0-1",
                     "--horizon", "10", "--out", str(res), "--no-plots", "--no-progress", "--no-score"]) == 0
        runs = json.loads((res / "results.json").read_text())["runs"]
        assert sorted({r["agent"] for r in runs}) == ["fair", f"sb3:{imp}"]
        assert all(np.isfinite(r["total_reward"]) for r in runs)


@pytest.fixture(scope="module")
def p4_dict_vecnormalize(tmp_path_factory):
    """A MultiInputPolicy PPO trained on VecNormalize(gym.make(P4)) (the Box keys normalised), and its statistics."""
    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

    d = tmp_path_factory.mktemp("vn")
    base = DummyVecEnv([lambda: gym.make(P4, horizon=30)])
    keys = [k for k, s in base.observation_space.spaces.items() if isinstance(s, gym.spaces.Box)]
    venv = VecNormalize(base, norm_obs_keys=keys)
    model = PPO("MultiInputPolicy", venv, n_steps=32, batch_size=32, n_epochs=1, seed=0, device="cpu")
    model.learn(64)
    model.save(d / "ppo.zip")
    venv.save(str(d / "vecnormalize.pkl"))
    venv.training = False
    return d, model, venv


def test_import_model_with_vecnormalize_statistics_acts_as_the_model(p4_dict_vecnormalize, tmp_path, capsys):
    d, model, venv = p4_dict_vecnormalize
    imp = tmp_path / "imp"
    assert main(["import-model", str(d / "ppo.zip"), "--env", P4, "--vecnormalize", str(d / "vecnormalize.pkl"),
                 "--out", str(imp)]) == 0
    meta = json.loads((imp / "clustergym.json").read_text())
    assert meta["normalize"] and meta["norm_obs_keys"] == venv.norm_obs_keys
    assert (imp / "vecnormalize.npz").exists()
    want = _rollout_actions(model, P4, 5, 6, normalize=venv.normalize_obs)
    got = _agent_actions(imp, P4, 5, 6)
    assert all(np.array_equal(a, b) for a, b in zip(got, want))
    # without the statistics the same weights act differently: the statistics are applied
    raw = tmp_path / "raw"
    assert main(["import-model", str(d / "ppo.zip"), "--env", P4, "--out", str(raw)]) == 0
    assert not all(np.array_equal(a, b) for a, b in zip(_agent_actions(raw, P4, 5, 6), want))


def test_import_model_flat_model_with_vecnormalize(tmp_path):
    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

    venv = VecNormalize(DummyVecEnv([lambda: gym.wrappers.FlattenObservation(gym.make(P1, horizon=30))]))
    model = PPO("MlpPolicy", venv, n_steps=32, batch_size=32, n_epochs=1, seed=0, device="cpu")
    model.learn(64)
    model.save(tmp_path / "m.zip")
    venv.save(str(tmp_path / "vn.pkl"))
    venv.training = False
    assert main(["import-model", str(tmp_path / "m.zip"), "--env", P1, "--vecnormalize", str(tmp_path / "vn.pkl"),
                 "--out", str(tmp_path / "imp")]) == 0
    flat = gym.wrappers.FlattenObservation(gym.make(P1))
    want = _rollout_actions(model, P1, 2, 5, normalize=lambda o: venv.normalize_obs(gym.spaces.flatten(
        flat.env.observation_space, o)))
    got = _agent_actions(tmp_path / "imp", P1, 2, 5)
    assert all(np.array_equal(a, b) for a, b in zip(got, want))


def test_vecnormalize_file_builds_no_other_class(tmp_path, capsys):
    """The statistics file is a pickle: a class other than numpy's, SB3's statistics and gymnasium's spaces is
    refused, and nothing is written."""
    import pickle

    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    bad = tmp_path / "bad.pkl"
    bad.write_bytes(pickle.dumps({"obs_rms": Evil()}))
    from stable_baselines3 import PPO

    PPO("MultiInputPolicy", gym.make(P4, horizon=10), n_steps=16, batch_size=16, device="cpu").save(tmp_path / "m.zip")
    line = one_line_exit_2(capsys, ["import-model", str(tmp_path / "m.zip"), "--env", P4, "--vecnormalize", str(bad),
                                    "--out", str(tmp_path / "imp")])
    assert "builtins.print" in line and "VecNormalize.save" in line and not (tmp_path / "imp").exists()


def test_import_model_names_the_keys_and_shapes_that_differ(tmp_path, capsys):
    from stable_baselines3 import PPO

    PPO("MultiInputPolicy", gym.make(P2, horizon=10), n_steps=16, batch_size=16, device="cpu").save(tmp_path / "p2.zip")
    e0 = gym.make(P2).unwrapped.problem.num_edges
    seed = next(k for k in range(1, 20) if gym.make(P2, scenario_seed=k).unwrapped.problem.num_edges != e0)
    e1 = gym.make(P2, scenario_seed=seed).unwrapped.problem.num_edges
    line = one_line_exit_2(capsys, ["import-model", str(tmp_path / "p2.zip"), "--env", P2, "--set",
                                    f"scenario_seed={seed}", "--out", str(tmp_path / "imp")])
    assert f"edge_alpha: model Box({e0}, 6), env Box({e1}, 6)" in line and "edge_arrival" in line
    assert not (tmp_path / "imp").exists()
    line = one_line_exit_2(capsys, ["import-model", str(tmp_path / "p2.zip"), "--env", P4, "--out", str(tmp_path / "i")])
    assert "keys the model expects and clustergym/ApproxJobs-v0 lacks" in line and "edge_alpha" in line


def test_two_sb3_agents_get_different_colours_in_every_figure_of_run(tmp_path, monkeypatch):
    from matplotlib.colors import to_hex
    from stable_baselines3 import PPO

    from clustergym.core import plots

    model = PPO("MultiInputPolicy", gym.make(P4, horizon=10), n_steps=16, batch_size=16, seed=0, device="cpu")
    model.save(tmp_path / "m.zip")
    # two folders whose names alone would get one colour
    by: dict = {}
    for i in range(60):
        by.setdefault(plots.agent_color(f"sb3:{tmp_path}/m{i}"), []).append(i)
    i, j = next(v for v in by.values() if len(v) > 1)[:2]
    a, b = f"{tmp_path}/m{i}", f"{tmp_path}/m{j}"
    for d in (a, b):
        assert main(["import-model", str(tmp_path / "m.zip"), "--env", P4, "--out", d]) == 0
    seen = {}
    real_save = plots.save

    def spy(fig, path):
        lines = {ln.get_label(): to_hex(ln.get_color()) for ax in fig.axes for ln in ax.get_lines()}
        points = {t.get_text(): None for ax in fig.axes for t in ax.get_yticklabels()}
        cols = [to_hex(c.get_facecolor()[0]) for ax in fig.axes for c in ax.collections if len(c.get_facecolor())
                and hasattr(c, "get_offsets") and len(c.get_offsets())]
        seen[os.path.basename(path)] = (lines, points, cols)
        return real_save(fig, path)

    monkeypatch.setattr(plots, "save", spy)
    assert main(["run", P4, "--agents", f"sb3:{a},sb3:{b},fair", "--seeds", "0-1", "--horizon", "6", "--out",
                 str(tmp_path / "res"), "--no-progress", "--no-score"]) == 0
    lines, _, _ = seen["avg_reward.png"]
    assert lines[f"sb3:{a}"] != lines[f"sb3:{b}"]
    assert len({lines[f"sb3:{a}"], lines[f"sb3:{b}"], lines["fair"]}) == 3
    # the paired-difference figure: one colour per row, the same as in the curves
    _, rows, cols = seen["paired_difference.png"]
    assert len(set(cols)) == len(cols) == len(rows) and set(cols) <= set(lines.values())


def test_bench_plain_sb3_rows_beside_cartpole():
    from clustergym.bench.throughput import PLAIN_TARGET, plain_sb3_rows

    import torch

    rows = plain_sb3_rows(quick=True, envs=(("P4", P4),), reps=1)
    assert torch.get_num_threads() == 1  # the bench's other rows run at one thread
    # at torch's default threads: CartPole, the fast policy (with the target), SB3's head; then at one thread
    # (if the default is more): CartPole and the fast policy, no target
    assert rows[0].what.startswith("plain SB3 PPO, 1 env") and "CartPole-v1" in rows[0].what
    assert "(default)" in rows[0].what
    default = int(rows[0].what.split(" torch thread")[0].rsplit(", ", 1)[1])
    assert default >= 1 and len(rows) == (3 if default == 1 else 5)
    if default > 1:
        assert "1 torch thread" in rows[3].what and "CartPole-v1" in rows[3].what
        assert "FastMultiInputActorCriticPolicy" in rows[4].what and rows[4].ok is None and rows[4].measured > 0
    fast, slow = rows[1], rows[2]
    assert "FastMultiInputActorCriticPolicy" in fast.what and "MultiInputPolicy (SB3 head)" in slow.what
    for r in rows:
        assert r.measured > 0 and r.unit == "env-steps/s"
    ratio = float(fast.what.rsplit(", ", 1)[1].split("x")[0])
    assert ratio == pytest.approx(fast.measured / rows[0].measured, abs=0.006)
    assert fast.ok == (fast.measured >= PLAIN_TARGET * rows[0].measured) and slow.ok is None
    assert fast.measured > 3 * slow.measured  # one padded categorical instead of one per machine
