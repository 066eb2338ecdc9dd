"""Episode animations: one agent's episode, or two side by side on the same instance and seed.

``clustergym replay ENV_ID --agents esdp,lcf --seed 0 --out episode.gif`` runs each agent with
:func:`clustergym.runner.episode.run_episode` on an env built with ``render_mode="rgb_array"`` and keeps the episode
viewer's frame every ``every`` slots (and at the last slot). With two agents, both runs use the same
instance and the same dynamics seed (common random numbers: the same arrivals and the same realised
randomness), so the frames differ only where the agents' decisions differ; they are put side by side,
each under its agent's name, drawn with one colour scale (covering both episodes) and one time axis (to the
later episode's end), so the panels compare at a glance. The file is a GIF (``.gif``) or an MP4 (``.mp4``,
needs the ``imageio-ffmpeg`` package), written with imageio.
"""

from __future__ import annotations

import math
import os
import tempfile

import numpy as np

from clustergym.core.agent import make as make_agent
from clustergym.core.scenario import check_memory
from clustergym.runner.episode import make_env, run_episode
from clustergym.core.viewer import _plt

__all__ = ["record_episode", "episode_extent", "shared_view", "side_by_side", "replay", "check_writer", "MAX_FRAMES"]

MAX_FRAMES = 100  # default frames per animation: every = ceil(horizon / MAX_FRAMES)


def _env(env_id: str, seed: int, horizon: int | None, env_kwargs: dict | None):
    kwargs = dict(env_kwargs or {})
    kwargs.setdefault("scenario_seed", seed)  # as clustergym run: the run with seed s uses instance s
    if horizon is not None:
        kwargs["horizon"] = horizon
    return make_env(env_id, render_mode="rgb_array", **kwargs)


def record_episode(env_id: str, agent: str, seed: int = 0, *, horizon: int | None = None, every: int | None = None,
                   env_kwargs: dict | None = None, shared_scale: tuple[float, float] | None = None,
                   end_slot: int | None = None) -> list[np.ndarray]:
    """The viewer's frames of ``agent``'s episode on instance ``seed`` (unless ``env_kwargs`` has a
    ``scenario_seed``) with dynamics seed ``seed``: after reset, then every ``every`` slots and at the end.
    ``shared_scale``/``end_slot``: the timeline's colour scale and last slot, fixed (side-by-side replays)."""
    env = _env(env_id, seed, horizon, env_kwargs)
    n = int(env.unwrapped.horizon)
    every = max(1, math.ceil(n / MAX_FRAMES)) if every is None else int(every)
    if every < 1:
        raise ValueError(f"every={every} is invalid: expected an integer >= 1 (slots between frames)")
    env.reset(seed=seed)  # builds the viewer; run_episode resets again with the same seed
    viewer = env.unwrapped.viewer
    viewer.label = agent
    viewer.shared_scale, viewer.end_slot = shared_scale, end_slot
    frames = [env.render()]  # slot 0 (run_episode's reset with the same seed starts the same episode)

    def grab(tr) -> None:
        if (tr.t + 1) % every == 0 or tr.t + 1 == n:
            frames.append(env.render())

    ep = run_episode(env, make_agent(agent, env_id=env_id), seed, on_step=grab)
    if (ep.steps % every) and ep.steps < n:  # ended early (terminated): keep the last slot too
        frames.append(env.render())
    env.close()
    return frames


def episode_extent(env_id: str, agent: str, seed: int = 0, *, horizon: int | None = None,
                   env_kwargs: dict | None = None) -> tuple[tuple[float, float] | None, int]:
    """The colour scale the last frame of ``agent``'s episode asks for (None when the viewer has no scaled
    timeline) and the slots the episode ran: the episode run once, drawn once at its end."""
    env = _env(env_id, seed, horizon, env_kwargs)
    env.reset(seed=seed)
    ep = run_episode(env, make_agent(agent, env_id=env_id), seed)
    viewer = env.unwrapped.viewer
    _plt().close(viewer.figure())
    scale = viewer.natural_scale
    env.close()
    return scale, int(ep.steps)


def shared_view(extents: list[tuple[tuple[float, float] | None, int]]) -> tuple[tuple[float, float] | None, int]:
    """One colour scale covering every episode's (None if any viewer has none) and the latest end slot."""
    scales = [s for s, _ in extents if s is not None]
    scale = None if len(scales) < len(extents) else (min(s[0] for s in scales), max(s[1] for s in scales))
    return scale, max(n for _, n in extents)


def side_by_side(a: list[np.ndarray], b: list[np.ndarray], gap: int = 8) -> list[np.ndarray]:
    """Frames of two episodes next to each other (the shorter one holds its last frame)."""
    n = max(len(a), len(b))
    out = []
    for i in range(n):
        fa, fb = a[min(i, len(a) - 1)], b[min(i, len(b) - 1)]
        h = max(fa.shape[0], fb.shape[0])
        pad = lambda f: np.pad(f, ((0, h - f.shape[0]), (0, 0), (0, 0)), constant_values=255)  # noqa: E731
        out.append(np.concatenate([pad(fa), np.full((h, gap, 3), 255, np.uint8), pad(fb)], axis=1))
    return out


FRAME_BYTES = 1.5 * 2**20  # an upper estimate of one viewer frame (RGB, about 800 x 600)


def check_writer(ext: str) -> None:
    """ValueError naming the package to install when the writer of ``ext`` (.gif or .mp4) is missing."""
    try:
        if ext == ".mp4":
            import imageio_ffmpeg  # noqa: F401 - the ffmpeg binary imageio writes MP4 with
        else:
            import PIL  # noqa: F401 - imageio's GIF writer
    except ImportError:
        pkg = "imageio-ffmpeg" if ext == ".mp4" else "pillow"
        raise ValueError(f"writing a {ext} animation needs the {pkg} package (pip install {pkg})"
                         + ("; or write a .gif" if ext == ".mp4" else "")) from None


def _frames_of(n: int, every: int | None) -> int:
    step = max(1, math.ceil(n / MAX_FRAMES)) if every is None else max(1, int(every))
    return n // step + 2


def replay(env_id: str, agents: list[str], out: str, seed: int = 0, *, horizon: int | None = None,
           every: int | None = None, fps: float = 8.0, env_kwargs: dict | None = None,
           overwrite: bool = False) -> str:
    """Write the animation of one agent's episode, or two agents' side by side, to ``out`` (.gif or .mp4).

    Every argument is checked before the episode runs. An existing ``out`` is refused unless ``overwrite``;
    the animation is written to a temporary file beside ``out`` and moved into place only when complete, so
    an error, an interruption or a full disk leaves an earlier file as it was."""
    if not 1 <= len(agents) <= 2:
        raise ValueError(f"agents={agents!r} is invalid: expected one agent or two (side by side)")
    ext = os.path.splitext(out)[1].lower()
    if ext not in (".gif", ".mp4"):
        raise ValueError(f"out={out!r} is invalid: expected a .gif or .mp4 file name")
    if not isinstance(fps, (int, float)) or not math.isfinite(fps) or fps <= 0:
        raise ValueError(f"fps={fps} is invalid: expected a finite number > 0")
    if horizon is not None and horizon < 1:
        raise ValueError(f"horizon={horizon} is invalid: expected an integer >= 1")
    if every is not None and every < 1:
        raise ValueError(f"every={every} is invalid: expected an integer >= 1 (slots between frames)")
    check_writer(ext)
    if os.path.isdir(out):
        raise ValueError(f"out={out!r} is a folder; expected a file name")
    existed = os.path.lexists(out)
    if existed and not overwrite:
        raise ValueError(f"{out!r} exists; pass --overwrite to replace it, or choose another file name")
    if horizon is not None:  # frames kept (and stacked once more to write), plus the env's per-slot arrays
        check_memory(2.0 * len(agents) * _frames_of(int(horizon), every) * FRAME_BYTES + 64.0 * horizon,
                     f"horizon={horizon}", f"the frames of {len(agents)} episode(s)")
    folder = os.path.dirname(os.path.abspath(out))
    try:  # the temporary file is made now: a folder that cannot take it fails before the episode
        fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(out) + ".", suffix=".partial" + ext, dir=folder)
        os.close(fd)
    except OSError as exc:
        raise ValueError(f"cannot write {out!r}: cannot create a file in {folder!r} "
                         f"({exc.strerror or type(exc).__name__})") from None
    try:
        view: dict = {}
        if len(agents) == 2:  # both panels drawn with one colour scale and one time axis (a first, undrawn run each)
            scale, end = shared_view([episode_extent(env_id, a, seed, horizon=horizon, env_kwargs=env_kwargs)
                                      for a in agents])
            view = {"shared_scale": scale, "end_slot": end}
        runs = [record_episode(env_id, a, seed, horizon=horizon, every=every, env_kwargs=env_kwargs, **view)
                for a in agents]
        frames = runs[0] if len(runs) == 1 else side_by_side(runs[0], runs[1])
        try:
            _write(tmp, np.stack(frames), ext, fps)
        except OSError as exc:
            kept = "the earlier file is unchanged" if existed else "nothing was written"
            raise ValueError(f"cannot write {out!r}: {exc.strerror or exc} ({kept})") from None
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # the mode a file the user creates gets (mkstemp makes it private)
        os.replace(tmp, out)
    except BaseException:
        try:
            os.remove(tmp)
        except OSError:
            pass
        raise
    return out


def _write(path: str, frames: np.ndarray, ext: str, fps: float) -> None:
    import imageio.v3 as iio

    if ext == ".gif":
        iio.imwrite(path, frames, extension=".gif", duration=1000.0 / fps, loop=0)
    else:
        iio.imwrite(path, frames, extension=".mp4", fps=fps)
