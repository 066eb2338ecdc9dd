"""The episode viewer of every env (clustergym/core/viewer.py and each family's render.py): a timeline of the
episode so far, the same frame size at every slot, a history kept only under a picture render mode."""

import pickle
import sys

import gymnasium as gym
import numpy as np
import pytest

import clustergym
from clustergym.core.viewer import History

IDS = list(clustergym.ENV_IDS)


def _timeline(env):
    """(xlim, image array) of the timeline panel of the viewer's current figure."""
    import matplotlib.pyplot as plt

    fig = env.unwrapped.viewer.figure()
    ax = fig.axes[0]
    xlim = ax.get_xlim()
    data = np.ma.filled(ax.images[0].get_array().astype(float), np.nan)
    plt.close(fig)
    return xlim, data


def _run(env, steps):
    for _ in range(steps):
        _, _, term, trunc, _ = env.step(env.action_space.sample())
        assert not (term or trunc)


@pytest.mark.parametrize("env_id", IDS)
def test_frame_timeline_covers_every_slot_so_far(env_id):
    env = gym.make(env_id, render_mode="rgb_array", horizon=60)
    env.reset(seed=0)
    env.action_space.seed(0)
    _run(env, 10)
    f10 = env.render()
    xlim10, img10 = _timeline(env)
    _run(env, 40)
    f50 = env.render()
    xlim50, img50 = _timeline(env)
    assert xlim10 == (0.0, 10.0) and xlim50 == (0.0, 50.0)
    assert img10.shape[1] == 10 and img50.shape[1] == 50  # one column per slot
    assert len(env.unwrapped.viewer.history) == 50
    # the timeline grows: the first 10 slots are drawn as they were
    np.testing.assert_array_equal(img50[:img10.shape[0], :10], img10)
    assert f10.dtype == np.uint8 and f10.shape == f50.shape and f10.shape[2] == 3  # same frame size every slot
    assert f10.std() > 0 and not np.array_equal(f10, f50)
    env.close()


def test_p1_timeline_holds_the_executed_channels_and_their_utilities():
    env = gym.make("clustergym/MultiServerChannel-v0", render_mode="rgb_array", horizon=30)
    env.reset(seed=3)
    env.action_space.seed(3)
    executed, utils = [], []
    for _ in range(12):
        _, _, _, _, info = env.step(env.action_space.sample())
        executed.append(info["feedback"]["executed"])
        utils.append(info["feedback"]["utilities"])
    _, img = _timeline(env)  # (E, 12): Z̃ where executed, -1 usable not selected, NaN no job
    ex = np.array(executed).T
    np.testing.assert_array_equal(img[ex], np.array(utils).T[ex])
    assert np.all((img[~ex] == -1) | np.isnan(img[~ex]))


def test_p4_frame_is_not_blank_before_the_first_arrival():
    env = gym.make("clustergym/ApproxJobs-v0", render_mode="rgb_array", horizon=200)
    obs, _ = env.reset(seed=0)
    for _ in range(5):
        assert not obs["job_mask"].any()  # this instance's first job arrives later (slot ~70)
        obs, *_ = env.step(np.zeros(env.action_space.shape, dtype=env.action_space.dtype))
    img = env.render()
    xlim, _ = _timeline(env)
    assert xlim == (0.0, 5.0)
    # not blank: axes, colour bar, legends and the busy-machine panel are drawn (many distinct colours)
    assert img.std() > 10 and np.unique(img.reshape(-1, 3), axis=0).shape[0] > 50


@pytest.mark.parametrize("env_id", IDS)
def test_human_mode_without_pygame_is_one_clear_error(env_id, monkeypatch):
    monkeypatch.setitem(sys.modules, "pygame", None)  # import pygame -> ImportError
    with pytest.raises(gym.error.DependencyNotInstalled) as err:
        gym.make(env_id, render_mode="human")
    msg = str(err.value)
    assert "\n" not in msg and "pygame" in msg and "rgb_array" in msg


def test_human_mode_shows_the_frames_in_a_window(monkeypatch):
    pygame = pytest.importorskip("pygame")  # the [viewer] extra (installed by make setup)
    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")
    env = gym.make("clustergym/MultiServerChannel-v0", render_mode="human", horizon=5)
    env.metadata["render_fps"] = 1000
    env.reset(seed=0)
    env.step(env.action_space.sample())
    surface = pygame.display.get_surface()
    frame = env.unwrapped.viewer.frame()
    assert surface.get_size() == (frame.shape[1], frame.shape[0])
    shown = pygame.surfarray.array3d(surface).swapaxes(0, 1)
    np.testing.assert_array_equal(shown, frame)
    assert env.render() is None
    env.close()
    assert env.unwrapped.viewer._window is None


@pytest.mark.parametrize("env_id", IDS)
def test_render_without_a_mode_warns_as_gymnasium_does(env_id):
    env = gym.make(env_id, horizon=5)
    env.reset(seed=0)
    with pytest.warns(UserWarning, match="without specifying any render mode"):
        assert env.render() is None


@pytest.mark.parametrize("env_id", IDS)
def test_no_history_without_a_picture_mode(env_id):
    for mode in (None, "ansi"):
        env = gym.make(env_id, horizon=5, render_mode=mode)
        env.reset(seed=0)
        env.step(env.action_space.sample())
        assert env.unwrapped.viewer is None


def test_viewer_survives_pickle_and_restarts_with_the_episode():
    env = gym.make("clustergym/RingAllReduce-v0", render_mode="rgb_array", horizon=20)
    env.reset(seed=1)
    env.action_space.seed(1)
    for _ in range(5):
        env.step(env.action_space.sample())
    copy = pickle.loads(pickle.dumps(env.unwrapped))
    np.testing.assert_array_equal(copy.render(), env.unwrapped.render())
    env.reset(seed=1)
    assert len(env.unwrapped.viewer.history) == 0


def test_history_grows_and_keeps_every_row():
    h = History()
    rows = np.random.default_rng(0).random((300, 4))
    for i, r in enumerate(rows):
        h.append(x=r, i=i)
    np.testing.assert_array_equal(h["x"], rows)
    np.testing.assert_array_equal(h["i"], np.arange(300))
    h.clear()
    h.append(x=rows[0], i=0)
    assert len(h) == 1 and h["x"].shape == (1, 4)
    with pytest.raises(KeyError, match="nothing recorded"):
        h["y"]


# -- clustergym replay ------------------------------------------------------------------------------------
P1 = "clustergym/MultiServerChannel-v0"


def test_replay_writes_two_agents_side_by_side_on_the_same_episode(tmp_path, capsys):
    import imageio.v3 as iio

    from clustergym.cli.main import main
    from clustergym.runner.replay import record_episode

    out = tmp_path / "x.gif"
    rc = main(["replay", P1, "--agents", "esdp,lcf", "--seed", "0", "--horizon", "6", "--every", "2",
               "--out", str(out)])
    assert rc == 0 and f"wrote {out}" in capsys.readouterr().out
    gif = iio.imread(out)
    esdp = record_episode(P1, "esdp", 0, horizon=6, every=2)
    assert len(esdp) == 4  # slot 0, 2, 4, 6
    h, w, _ = esdp[0].shape
    assert gif.shape == (4, h, 2 * w + 8, 3)
    left, right = gif[:, :, :w], gif[:, :, w + 8:]
    # slot 0: the same instance and seed, so both halves are the same picture below the title (agent name)
    body = slice(h // 8, h)
    np.testing.assert_array_equal(left[0, body], right[0, body])
    assert not np.array_equal(left[-1, body], right[-1, body])  # the agents decided differently
    # the left half is esdp's episode (GIF colours are quantised: compare loosely)
    assert np.abs(left[-1].astype(int) - esdp[-1].astype(int)).mean() < 3


def test_side_by_side_is_exact_and_holds_the_shorter_episode():
    from clustergym.runner.replay import side_by_side

    rng = np.random.default_rng(0)
    a = [rng.integers(0, 255, (4, 5, 3), dtype=np.uint8) for _ in range(3)]
    b = [rng.integers(0, 255, (4, 5, 3), dtype=np.uint8) for _ in range(2)]
    out = side_by_side(a, b, gap=2)
    assert len(out) == 3
    np.testing.assert_array_equal(out[2][:, :5], a[2])
    np.testing.assert_array_equal(out[2][:, 7:], b[1])
    assert (out[0][:, 5:7] == 255).all()


@pytest.mark.parametrize("argv, needle", [
    (["--agents", "esdp,lcf,random"], "--agents"),
    (["--agents", "esdp", "--out", "x.txt"], "out="),
    (["--agents", "esdp", "--every", "0"], "--every"),
    (["--agents", "esdp", "--set", "render_mode=ansi"], "render_mode"),
])
def test_replay_bad_input_is_one_line(argv, needle, tmp_path, capsys):
    from clustergym.cli.main import main

    if "--out" not in argv:
        argv = [*argv, "--out", str(tmp_path / "x.gif")]
    assert main(["replay", P1, "--horizon", "3", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err, err


def test_gallery_command_writes_a_viewer_frame_and_a_comparison_figure(tmp_path, monkeypatch):
    import imageio.v3 as iio

    from clustergym.core.family import env_entry
    from clustergym.experiments import gallery

    paper, ref, bases, _, _ = gallery.papers()[P1]
    assert (paper, ref) == ("ESDP (P1)", "esdp")
    hooks = env_entry(P1)[0].hooks()
    monkeypatch.setattr(hooks, "GALLERY", (tuple(bases[:1]), 6, 4))  # short runs: the family's hook says so
    assert gallery.papers()[P1] == (paper, ref, bases[:1], 6, 4)
    monkeypatch.setattr(gallery, "INSTANCES", (0, 1))
    assert gallery.main(["--out", str(tmp_path), "--only", "MultiServerChannel-v0"]) == 0
    frame = iio.imread(tmp_path / "viewer_MultiServerChannel-v0.png")
    np.testing.assert_array_equal(frame, gallery.viewer_frame(P1, 4, ref))  # slot 4 of esdp, instance 0
    fig = iio.imread(tmp_path / "paper_MultiServerChannel-v0.png")
    assert fig.ndim == 3 and fig.shape[1] > fig.shape[0] and fig.std() > 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["paper_MultiServerChannel-v0.png",
                                                          "viewer_MultiServerChannel-v0.png"]


def test_p3_frame_labels_every_rack_and_keys_every_ring_of_the_last_slot():
    """Small racks beside each other still get a label each (spread apart, not dropped); the key names every
    job of the last slot with its colour in the timeline, and two jobs drawn together never share a colour."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_hex

    from clustergym.core.agent import make

    env = gym.make("clustergym/RingAllReduce-v0", render_mode="rgb_array", horizon=80)
    obs, info = env.reset(seed=0)
    # GADGET with its repair step keeps many jobs running (as written it embeds few), so the key is long
    agent = make("gadget[rounding_repair=true]", env_id="clustergym/RingAllReduce-v0")
    agent.reset(env.unwrapped.problem, seed=0)
    for _ in range(60):
        a = agent.act(obs, info)
        obs, r, term, trunc, info = env.step(a)
        agent.update(obs, a, r, obs, info)
    viewer = env.unwrapped.viewer
    racks = np.asarray(env.unwrapped.problem.topology.rack_of)
    sizes = np.bincount(racks)
    assert sizes.min() <= 2  # the default instance has a rack too small for a tick label of its own
    fig = viewer.figure()
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.texts if t.get_text().startswith("rack ")]
    assert sorted(labels) == [f"rack {k}" for k in range(racks.max() + 1)]
    ys = sorted(t.get_position()[1] for t in ax.texts if t.get_text().startswith("rack "))
    assert min(np.diff(ys)) >= 50 / (1.6 * 12) - 1e-9  # no two labels on top of each other
    last = viewer.history["main_job"][-1]
    jobs = sorted(int(j) for j in np.unique(last[last >= 0]))
    keyed = {t.get_text().split(":")[0]: to_hex(h.get_facecolor())
             for t, h in zip(ax.get_legend().get_texts(), ax.get_legend().legend_handles)}
    assert [k for k in keyed if k.startswith("job ")] == [f"job {j}" for j in jobs] and len(jobs) > 10
    assert len({keyed[f"job {j}"] for j in jobs}) == len(jobs)
    # the key's colour is the colour of the job's servers in the last column of the timeline
    img = ax.images[0]
    col = img.to_rgba(img.get_array()[:, -1])
    for j in jobs[:5]:
        row = int(np.flatnonzero(last == j)[0])
        assert to_hex(col[row]) == keyed[f"job {j}"]
    plt.close(fig)
    env.close()
