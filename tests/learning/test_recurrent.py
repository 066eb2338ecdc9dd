"""RecurrentPPO (sb3-contrib's LSTM policy): trains through ``clustergym train``, and the ``sb3:`` agent carries
its state from slot to slot within an episode and starts each episode from zeros."""

import json

import numpy as np
import pytest

pytest.importorskip("sb3_contrib")

from clustergym.core.agent import make  # noqa: E402
from clustergym.cli.main import main  # noqa: E402
from clustergym.learning.training import TrainConfig, train  # noqa: E402

P2 = "clustergym/MultiServerAllocation-v0"


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    out = tmp_path_factory.mktemp("rppo") / "run"
    meta = train(TrainConfig(P2, "recurrent_ppo", 256, env_kwargs={"horizon": 24}, n_envs=2,
                             hyperparams={"n_steps": 64, "batch_size": 64, "n_epochs": 2}), str(out), progress=False)
    return out, meta


def test_trains_with_the_shipped_entry_and_runs_through_the_runner(model, tmp_path, capsys):
    out, meta = model
    assert meta["algo"] == "recurrent_ppo" and meta["env_kwargs"]["action_mode"] == "port"
    assert meta["obs_layout"] == "compact"  # recurrent_ppo.yml's P2 entry, as ppo.yml's
    res = tmp_path / "cmp"
    assert main(["run", P2, "--agents", f"sb3:{out},drf", "--instances", "0-1", "--seeds", "0", "--horizon", "12",
                 "--out", str(res), "--no-plots", "--no-progress"]) == 0, capsys.readouterr().err
    runs = [r for r in json.loads((res / "results.json").read_text())["runs"] if r["agent"].startswith("sb3:")]
    assert len(runs) == 2 and all(r["steps"] == 12 and np.isfinite(r["total_reward"]) for r in runs)


def _actions(agent, obs, info, seed, n=3):
    agent.reset(agent._problem, seed=seed)
    return [np.asarray(agent.act(obs, info)).copy() for _ in range(n)]


def test_the_state_carries_within_an_episode_and_resets_with_it(model):
    import gymnasium as gym

    out, meta = model
    env = gym.make(P2, **{**meta["env_kwargs"], "horizon": 24})
    obs, info = env.reset(seed=0)
    agent = make(f"sb3:{out}")
    agent._problem = env.unwrapped.problem
    first = _actions(agent, obs, info, 0)
    # the same observation three times: the LSTM state moves, so the actions differ from slot to slot ...
    assert any(not np.allclose(first[0], a) for a in first[1:])
    # ... and a new episode starts from zeros: the same actions again
    again = _actions(agent, obs, info, 0)
    assert all(np.array_equal(a, b) for a, b in zip(first, again))
