"""`clustergym replay` with a trained model beside the paper's policy (each agent's env built as `clustergym run`
builds it), the frames it draws (one scale for both panels, P1's oracle reference), the progress bar, the fps
range and the exclusive creation of --out."""

import os
import threading

import numpy as np
import pytest

from clustergym.cli.main import main

PAPER = {"MultiServerChannel-v0": "esdp", "MultiServerAllocation-v0": "ogasched", "RingAllReduce-v0": "gadget",
         "ApproxJobs-v0": "opm"}
FRAME = (448, 720)  # every env's viewer frame (clustergym.core.viewer.FRAME_SIZE at FRAME_DPI)


def _one_line(capsys):
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


def _frames(path):
    import imageio.v3 as iio

    return iio.imread(path, extension=os.path.splitext(path)[1])


@pytest.mark.parametrize("ext", [".gif", ".mp4"])
@pytest.mark.parametrize("name", sorted(PAPER))
def test_pretrained_model_beside_the_paper_policy(name, ext, tmp_path, capsys, caplog):
    """The shipped model acts in an env with its side-car's padding and action mode, the paper's policy in the
    env's own: both play slots 0..2 of one instance, side by side (3 frames each: slots 0, 1, 2)."""
    out = tmp_path / f"x{ext}"
    agents = f"sb3:pretrained/{name},{PAPER[name]}"
    assert main(["replay", f"clustergym/{name}", "--agents", agents, "--horizon", "2", "--every", "1",
                 "--out", str(out)]) == 0, capsys.readouterr().err
    std = capsys.readouterr()
    lines = std.out.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith("expected replay time") and lines[1] == f"wrote {out}", lines
    assert std.err == ""
    assert not [r for r in caplog.records if "macro_block_size" in r.getMessage()]  # padded, not resized
    frames = _frames(str(out))
    assert frames.shape[0] == 3
    width = 2 * FRAME[1] + 8  # two panels and the gap; an MP4 padded to whole 16-pixel blocks
    assert frames.shape[1:] == (FRAME[0], width if ext == ".gif" else width + -width % 16, 3)
    left, right = frames[-1][:, :FRAME[1]], frames[-1][:, FRAME[1] + 8:]
    assert not np.array_equal(left, right)  # two panels, each titled with its agent
    assert os.listdir(tmp_path) == [out.name]


def test_a_model_gets_its_side_car_env_kwargs_and_the_paper_policy_the_env_defaults():
    from clustergym.runner.evaluation import planned_runs

    tasks, made = planned_runs("clustergym/RingAllReduce-v0", ["sb3:pretrained/RingAllReduce-v0", "gadget"], [3], 2)
    assert list(made) == ["sb3:pretrained/RingAllReduce-v0"]
    kw = {t[1]: t[4] for t in tasks}
    assert kw["sb3:pretrained/RingAllReduce-v0"]["action_mode"] == "ring_size"
    assert "max_racks" in kw["sb3:pretrained/RingAllReduce-v0"]
    assert "action_mode" not in kw["gadget"] and "max_racks" not in kw["gadget"]
    assert {k["scenario_seed"] for k in kw.values()} == {3}  # the same instance for both


def _spy_figures(monkeypatch):
    from clustergym.core.viewer import EpisodeViewer

    drawn = []
    real = EpisodeViewer.figure

    def spy(self):
        fig = real(self)
        bx = fig.axes[1]
        drawn.append((self.label, bx.get_ylim(), [ln.get_label() for ln in bx.get_lines()]))
        return fig

    monkeypatch.setattr(EpisodeViewer, "figure", spy)
    return drawn


def test_side_by_side_totals_share_one_scale_and_p1_draws_its_oracle(tmp_path, monkeypatch):
    drawn = _spy_figures(monkeypatch)
    out = tmp_path / "x.gif"
    assert main(["replay", "clustergym/MultiServerChannel-v0", "--agents", "esdp,random", "--horizon", "6",
                 "--every", "3", "--out", str(out)]) == 0
    frames = [d for a in ("esdp", "random") for d in [e for e in drawn if e[0] == a][1:]]  # [0]: the undrawn run
    assert len(frames) == 6
    natural = {a: [d for d in drawn if d[0] == a][0][1] for a in ("esdp", "random")}
    assert natural["esdp"] != natural["random"]  # alone, the panels' totals would differ in scale
    assert len({d[1] for d in frames}) == 1  # one y scale for both panels at every frame
    lo, hi = frames[0][1]
    assert lo <= min(v[0] for v in natural.values()) and hi >= max(v[1] for v in natural.values())
    with_lines = [d for d in frames if d[2]]  # every frame after slot 0
    assert len(with_lines) == 4 and all(any("oracle" in lab for lab in d[2]) for d in with_lines)  # the reference


class _Bar:
    made: list = []

    def __init__(self, total, disable=None, **kw):
        self.total, self.n, self.disable = total, 0, disable
        _Bar.made.append(self)

    def update(self, k=1):
        self.n += k

    def set_description_str(self, s):
        pass

    def close(self):
        pass


@pytest.mark.parametrize("flag", [[], ["--no-progress"]])
def test_the_progress_bar_counts_every_frame(flag, tmp_path, monkeypatch):
    import tqdm.auto

    monkeypatch.setattr(tqdm.auto, "tqdm", _Bar)
    _Bar.made = []
    out = tmp_path / "x.gif"
    assert main(["replay", "clustergym/ApproxJobs-v0", "--agents", "fair,random", "--horizon", "5", "--every", "2",
                 "--out", str(out), *flag]) == 0
    (bar,) = _Bar.made
    assert bar.disable is (True if flag else None)  # None: tqdm shows it on a terminal only
    assert bar.total == bar.n == 4 * 4  # 2 agents x (an undrawn and a drawn run) x frames at slots 0, 2, 4, 5
    assert len(_frames(str(out))) == 4


@pytest.mark.parametrize("fps,ext", [("0.001", "gif"), ("1e308", "mp4"), ("101", "gif")])
def test_an_fps_no_file_can_hold_is_refused_before_the_episode(fps, ext, tmp_path, capsys, monkeypatch):
    import clustergym.runner.replay as rp

    monkeypatch.setattr(rp, "_animation", lambda *a, **k: pytest.fail("the episode ran"))
    code = main(["replay", "clustergym/ApproxJobs-v0", "--agents", "fair", "--horizon", "2", "--fps", fps,
                 "--out", str(tmp_path / f"x.{ext}")])
    assert code == 2
    assert "fps" in _one_line(capsys)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("ext", [".gif", ".mp4"])
def test_the_ends_of_the_fps_range_write(ext, tmp_path):
    from clustergym.runner.replay import FPS_RANGE, _write, check_fps

    frames = np.zeros((2, 32, 32, 3), np.uint8)
    frames[1] = 255
    for fps in FPS_RANGE:
        path = str(tmp_path / f"{fps}{ext}")
        _write(path, frames, ext, check_fps(fps))
        assert len(_frames(path)) == 2


def _fake_animation(colour, started, release):
    def animation(*args, **kwargs):
        started.set()
        assert release.wait(20)
        return [np.full((16, 16, 3), colour, np.uint8)] * 2

    return animation


def test_two_concurrent_replays_to_one_file_one_wins_the_other_fails(tmp_path, monkeypatch):
    """Both start before either has written: the first reserves the name, the second fails with one line, and
    the file is the first one's complete animation."""
    import clustergym.runner.replay as rp

    out = str(tmp_path / "b.gif")
    started, release = threading.Event(), threading.Event()
    monkeypatch.setattr(rp, "_animation", _fake_animation(200, started, release))
    result: dict = {}

    def first():
        try:
            result["first"] = rp.replay("clustergym/ApproxJobs-v0", ["fair"], out, horizon=2)
        except Exception as exc:  # pragma: no cover - reported by the assertions below
            result["first"] = exc
            started.set()

    t = threading.Thread(target=first)
    t.start()
    assert started.wait(60) and "first" not in result, result
    with pytest.raises(ValueError) as err:  # the second: the name is taken while the first still runs
        rp.replay("clustergym/ApproxJobs-v0", ["fair"], out, horizon=2)
    release.set()
    t.join(60)
    assert result["first"] == out
    assert "exists" in str(err.value) and len(str(err.value).splitlines()) == 1
    assert int(_frames(out)[0].mean()) == 200  # the first's animation, whole
    assert sorted(os.listdir(tmp_path)) == ["b.gif"]


def test_a_file_made_after_the_check_is_not_replaced(tmp_path, capsys, monkeypatch):
    """The race the early check cannot see: another writer creates the file after it. The name is taken
    exclusively, so this replay fails with one line and the other's file stays as it was."""
    import clustergym.runner.replay as rp

    out = tmp_path / "b.gif"
    out.write_bytes(b"the other replay's animation")
    real = os.path.lexists
    monkeypatch.setattr(rp.os.path, "lexists", lambda p: False if os.fspath(p) == str(out) else real(p))
    monkeypatch.setattr(rp, "_animation", lambda *a, **k: pytest.fail("the episode ran"))
    assert main(["replay", "clustergym/ApproxJobs-v0", "--agents", "fair", "--horizon", "2", "--out", str(out)]) == 2
    assert "another process" in _one_line(capsys)
    assert out.read_bytes() == b"the other replay's animation" and os.listdir(tmp_path) == ["b.gif"]


def test_a_failed_replay_removes_its_placeholder(tmp_path, capsys, monkeypatch):
    import clustergym.runner.replay as rp

    def boom(*a, **k):
        raise ValueError("the agent failed")

    monkeypatch.setattr(rp, "run_episode", boom)
    assert main(["replay", "clustergym/ApproxJobs-v0", "--agents", "fair", "--horizon", "2",
                 "--out", str(tmp_path / "x.gif")]) == 2
    assert "the agent failed" in _one_line(capsys)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("racks,servers", [(30, 50), (25, 200), (5, 50)])
def test_rack_labels_never_overlap_each_other_or_the_axis_label(racks, servers):
    import gymnasium as gym

    env = gym.make("clustergym/RingAllReduce-v0", render_mode="rgb_array", horizon=2, scenario_seed=0,
                   num_racks=racks, num_servers=servers)
    env.reset(seed=0)
    fig = env.unwrapped.viewer.figure()
    fig.canvas.draw()
    ax = fig.axes[0]
    renderer = fig.canvas.get_renderer()
    labels = [t for t in ax.texts if t.get_text().startswith("rack ")]
    labels += [t for t in ax.get_yticklabels() if t.get_text().startswith("rack ")]
    boxes = [t.get_window_extent(renderer) for t in labels]
    assert len(boxes) >= min(racks, 10)  # labelled: all racks when they fit, else as many as fit
    if racks == 5:
        assert len(boxes) == 5
    for i, a in enumerate(boxes):
        assert not any(a.overlaps(b) for b in boxes[i + 1:]), "two rack labels overlap"
        assert not a.overlaps(ax.yaxis.label.get_window_extent(renderer)), "a rack label covers the axis label"
    env.close()


def test_the_human_window_starts_only_pygame_s_display(monkeypatch):
    """pygame.init() would start audio too (ALSA errors on a headless machine): only the display is started."""
    import sys
    import types

    from clustergym.core.viewer import EpisodeViewer

    calls = []
    fake = types.SimpleNamespace(
        init=lambda: calls.append("init"), quit=lambda: calls.append("quit"),
        display=types.SimpleNamespace(init=lambda: calls.append("display.init"), set_mode=lambda size: "screen",
                                      set_caption=lambda t: None, flip=lambda: None,
                                      quit=lambda: calls.append("display.quit")),
        time=types.SimpleNamespace(Clock=lambda: types.SimpleNamespace(tick=lambda fps: None)),
        surfarray=types.SimpleNamespace(make_surface=lambda a: a), event=types.SimpleNamespace(pump=lambda: None))
    fake_screen = types.SimpleNamespace(blit=lambda *a: None)
    fake.display.set_mode = lambda size: fake_screen
    monkeypatch.setitem(sys.modules, "pygame", fake)

    class Flat(EpisodeViewer):
        def draw(self, ax, bx):
            return ""

    v = Flat("human", horizon=2)
    v.reset()
    v.close()
    assert "display.init" in calls and "init" not in calls


def test_a_long_agent_name_goes_on_its_own_line_in_both_panels(tmp_path, monkeypatch):
    """A model's path does not fit before the title: it gets a line of its own, and so does the other panel's
    name, so that both panels keep one layout."""
    import clustergym.runner.replay as rp
    from clustergym.core.viewer import EpisodeViewer

    titles = []
    real = EpisodeViewer.figure

    def spy(self):
        fig = real(self)
        titles.append(fig._suptitle.get_text())
        return fig

    monkeypatch.setattr(EpisodeViewer, "figure", spy)
    monkeypatch.setattr(rp, "replay_estimate", lambda *a, **k: "")  # its warm-up draws frames of its own
    out = tmp_path / "x.gif"
    assert main(["replay", "clustergym/ApproxJobs-v0", "--agents", "sb3:pretrained/ApproxJobs-v0,opm",
                 "--horizon", "1", "--out", str(out)]) == 0
    drawn = titles[2:]  # [:2]: the undrawn runs' ends (for the shared scales)
    assert len(drawn) == 4 and {t.split("\n")[0] for t in drawn} == {"[sb3:pretrained/ApproxJobs-v0]", "[opm]"}
    titles.clear()
    assert main(["replay", "clustergym/ApproxJobs-v0", "--agents", "fair,opm", "--horizon", "1",
                 "--out", str(tmp_path / "y.gif")]) == 0
    assert all(t.split("\n")[0].startswith("[") and "ApproxJobs" in t.split("\n")[0] for t in titles)
