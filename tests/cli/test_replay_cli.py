"""`clustergym replay` never loses a file: an existing --out is refused without --overwrite; with it, the
old file is replaced only by a complete animation (a bad value, an error mid-episode or a full disk leave it
byte-identical); every bad input is one line, exit 2, before the episode runs."""

import errno
import os

import pytest

from clustergym.cli.main import main

P1 = "clustergym/MultiServerChannel-v0"
BASE = ["replay", P1, "--agents", "esdp", "--horizon", "3"]
OLD = b"an earlier animation"


def _old(tmp_path):
    out = tmp_path / "x.gif"
    out.write_bytes(OLD)
    return out


def _one_line(capsys):
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


def test_existing_file_is_refused_without_overwrite(tmp_path, capsys):
    out = _old(tmp_path)
    assert main([*BASE, "--out", str(out)]) == 2
    assert "--overwrite" in _one_line(capsys)
    assert out.read_bytes() == OLD and os.listdir(tmp_path) == ["x.gif"]


def test_overwrite_replaces_with_a_complete_animation(tmp_path, capsys):
    import imageio.v3 as iio

    out = _old(tmp_path)
    assert main([*BASE, "--out", str(out), "--overwrite"]) == 0
    assert iio.imread(out).ndim == 4 and os.listdir(tmp_path) == ["x.gif"]


@pytest.mark.parametrize("fps", ["nan", "inf", "0", "-1"])
def test_bad_fps_leaves_the_old_file(fps, tmp_path, capsys, monkeypatch):
    import clustergym.runner.replay as rp

    monkeypatch.setattr(rp, "record_episode", lambda *a, **k: pytest.fail("the episode ran"))
    out = _old(tmp_path)
    assert main([*BASE, "--fps", fps, "--out", str(out), "--overwrite"]) == 2
    assert "fps" in _one_line(capsys)
    assert out.read_bytes() == OLD and os.listdir(tmp_path) == ["x.gif"]


def test_error_mid_episode_leaves_the_old_file(tmp_path, capsys, monkeypatch):
    import clustergym.runner.replay as rp

    def boom(*a, **k):
        raise ValueError("the agent failed")

    monkeypatch.setattr(rp, "run_episode", boom)
    out = _old(tmp_path)
    assert main([*BASE, "--out", str(out), "--overwrite"]) == 2
    assert "the agent failed" in _one_line(capsys)
    assert out.read_bytes() == OLD and os.listdir(tmp_path) == ["x.gif"]


def test_interrupt_leaves_the_old_file(tmp_path, capsys, monkeypatch):
    import clustergym.runner.replay as rp

    def stop(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(rp, "run_episode", stop)
    out = _old(tmp_path)
    assert main([*BASE, "--out", str(out), "--overwrite"]) == 130
    assert out.read_bytes() == OLD and os.listdir(tmp_path) == ["x.gif"]


@pytest.mark.parametrize("existed", [True, False])
def test_full_disk_part_way_leaves_the_old_file(existed, tmp_path, capsys, monkeypatch):
    import clustergym.runner.replay as rp

    def full(path, frames, ext, fps):
        with open(path, "wb") as f:
            f.write(b"GIF89a partial")  # some bytes landed, then the disk filled
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)

    monkeypatch.setattr(rp, "_write", full)
    out = _old(tmp_path) if existed else tmp_path / "x.gif"
    assert main([*BASE, "--out", str(out), "--overwrite"]) == 2
    err = _one_line(capsys)
    assert "No space left" in err
    assert ("unchanged" in err) == existed and ("nothing was written" in err) == (not existed)
    if existed:
        assert out.read_bytes() == OLD and os.listdir(tmp_path) == ["x.gif"]
    else:
        assert os.listdir(tmp_path) == []


def test_unwritable_folder_fails_before_the_episode(tmp_path, capsys, monkeypatch):
    import clustergym.runner.replay as rp

    monkeypatch.setattr(rp, "record_episode", lambda *a, **k: pytest.fail("the episode ran"))
    assert main([*BASE, "--out", "/proc/x.gif"]) == 2
    assert "/proc" in _one_line(capsys)


def test_absurd_horizon_is_one_line(tmp_path, capsys):
    assert main(["replay", P1, "--agents", "esdp", "--horizon", "1000000000000", "--out",
                 str(tmp_path / "x.gif")]) == 2
    assert "horizon=1000000000000" in _one_line(capsys) and os.listdir(tmp_path) == []


def test_missing_mp4_writer_names_the_package(tmp_path, capsys, monkeypatch):
    import builtins

    import clustergym.runner.replay as rp

    real = builtins.__import__

    def no_ffmpeg(name, *a, **k):
        if name == "imageio_ffmpeg":
            raise ImportError(name)
        return real(name, *a, **k)

    monkeypatch.setattr(rp, "record_episode", lambda *a, **k: pytest.fail("the episode ran"))
    monkeypatch.setattr(builtins, "__import__", no_ffmpeg)
    assert main([*BASE, "--out", str(tmp_path / "x.mp4")]) == 2
    assert "imageio-ffmpeg" in _one_line(capsys) and os.listdir(tmp_path) == []


def test_mp4_is_playable_with_every_rendered_frame(tmp_path, capsys):
    import imageio.v3 as iio

    from clustergym.runner.replay import record_episode

    out = tmp_path / "x.mp4"
    assert main([*BASE, "--every", "1", "--out", str(out)]) == 0
    rendered = record_episode(P1, "esdp", 0, horizon=3, every=1)
    frames = iio.imread(out, plugin="pyav") if _has("av") else iio.imread(out, extension=".mp4")
    assert len(frames) == len(rendered) == 4  # slot 0, 1, 2, 3
    assert os.listdir(tmp_path) == ["x.mp4"]


def _has(mod):
    import importlib.util

    return importlib.util.find_spec(mod) is not None


def test_side_by_side_panels_share_one_colour_scale_and_one_end_slot(tmp_path, capsys, monkeypatch):
    from clustergym.core.viewer import EpisodeViewer

    P2 = "clustergym/MultiServerAllocation-v0"
    drawn = []  # (panel, natural scale, drawn scale, x-axis end) of every frame
    real = EpisodeViewer.figure

    def spy(self):
        fig = real(self)
        drawn.append((self.label, self.natural_scale, self.drawn_scale, fig.axes[0].get_xlim()[1]))
        return fig

    monkeypatch.setattr(EpisodeViewer, "figure", spy)
    out = tmp_path / "x.gif"
    assert main(["replay", P2, "--agents", "drf,random", "--horizon", "8", "--every", "2", "--out", str(out)]) == 0
    frames = {a: [d for d in drawn if d[0] == a][1:] for a in ("drf", "random")}  # [0]: the undrawn run's end
    natural = {a: f[-1][1] for a, f in frames.items()}
    assert natural["drf"] != natural["random"]  # the episodes alone would be drawn on different scales
    scales = {d[2] for f in frames.values() for d in f}
    assert scales == {(0.0, max(v[1] for v in natural.values()))}  # one scale for both panels, every frame
    assert {d[3] for f in frames.values() for d in f} == {8.0}  # one time axis, to the common end slot


def test_shared_view_covers_both_scales_and_ends_at_the_later_slot():
    from clustergym.runner.replay import shared_view

    assert shared_view([((0.0, 40.0), (0.0, 7.0), 561), ((0.0, 100.0), (-1.0, 5.0), 574)]) == {
        "shared_scale": (0.0, 100.0), "shared_totals": (-1.0, 7.0), "end_slot": 574}
    assert shared_view([(None, (0.0, 1.0), 5), ((0.0, 1.0), None, 3)]) == {
        "shared_scale": None, "shared_totals": None, "end_slot": 5}


def test_a_replay_file_gets_the_usual_permissions(tmp_path):
    """The animation is written through a private temporary file; the file moved into place has the mode any
    file the user creates gets (0666 less the umask), not the temporary file's 0600."""
    import stat

    from clustergym.cli.main import main

    out = tmp_path / "a.gif"
    old = os.umask(0o022)
    try:
        assert main(["replay", "clustergym/ApproxJobs-v0", "--agents", "fair", "--horizon", "3", "--out", str(out)]) == 0
    finally:
        os.umask(old)
    assert stat.S_IMODE(out.stat().st_mode) == 0o644
