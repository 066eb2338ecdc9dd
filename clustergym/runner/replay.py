"""Episode animations: one agent's episode, or two side by side on the same instance and seed.

``clustergym replay ENV_ID --agents esdp,lcf --seed 0 --out episode.gif`` runs each agent with
:func:`clustergym.runner.episode.run_episode` on an env built with ``render_mode="rgb_array"`` and keeps the episode
viewer's frame every ``every`` slots (and at the last slot). With two agents, both runs use the same
instance and the same dynamics seed (common random numbers: the same arrivals and the same realised
randomness), so the frames differ only where the agents' decisions differ; they are put side by side,
each under its agent's name, drawn with one colour scale and one scale of the totals (covering both episodes)
and one time axis (to the later episode's end), so the panels compare at a glance. Each agent's env is built
as ``clustergym run`` builds it: a trained model (``sb3:``) in an env with the padding and action kwargs of its
side-car, so it plays beside the paper's policy. The file is a GIF (``.gif``) or an MP4 (``.mp4``,
needs the ``imageio-ffmpeg`` package), written with imageio.
"""

from __future__ import annotations

import math
import os
import tempfile
from typing import Callable

import numpy as np

from clustergym.core.eta import describe_duration
from clustergym.core.scenario import check_memory
from clustergym.runner.episode import bound_agent, make_env, run_episode
from clustergym.runner.evaluation import planned_runs
from clustergym.core.viewer import EpisodeViewer, _plt

__all__ = ["record_episode", "episode_extent", "shared_view", "side_by_side", "replay", "check_writer", "check_fps",
           "MAX_FRAMES", "FPS_RANGE", "replay_estimate"]

MAX_FRAMES = 100  # default frames per animation: every = ceil(horizon / MAX_FRAMES)
LABEL_INLINE = 16  # the longest agent name shown on the title's line (longer ones go on a line of their own)
FPS_RANGE = (0.01, 100.0)  # a GIF stores each frame's delay in 1/100 s (2 bytes); an MP4's rate must be a sane rational


def _env(env_id: str, seed: int, horizon: int | None, env_kwargs: dict | None):
    kwargs = dict(env_kwargs or {})
    kwargs.setdefault("scenario_seed", seed)  # as clustergym run: the run with seed s uses instance s
    if horizon is not None:
        kwargs["horizon"] = horizon
    return make_env(env_id, render_mode="rgb_array", **kwargs), kwargs


def _every(n: int, every: int | None) -> int:
    every = max(1, math.ceil(n / MAX_FRAMES)) if every is None else int(every)
    if every < 1:
        raise ValueError(f"every={every} is invalid: expected an integer >= 1 (slots between frames)")
    return every


def _frames_of(n: int, every: int | None) -> int:
    """The frames of an episode of ``n`` slots that runs to its end: slot 0, every ``every``-th slot, the last."""
    step = _every(n, every)
    return 1 + n // step + (1 if n % step else 0)


def _run(env_id: str, agent: str, seed: int, horizon: int | None, every: int | None, env_kwargs: dict | None,
         view: dict, draw: bool, progress: Callable[[int], None] | None,
         acting=None) -> tuple[list[np.ndarray], EpisodeViewer, int]:
    """One episode of ``agent`` (an env built with ``env_kwargs``, the agent told them; ``acting``: the agent
    object already made so), its frames when ``draw``; ``progress(k)`` after every k frames (drawn or, when not
    ``draw``, passed)."""
    env, kwargs = _env(env_id, seed, horizon, env_kwargs)
    n = int(env.unwrapped.horizon)
    every = _every(n, every)
    env.reset(seed=seed)  # builds the viewer; run_episode resets again with the same seed
    viewer = env.unwrapped.viewer
    viewer.label = agent
    for key, value in view.items():  # shared_scale, shared_totals, end_slot
        setattr(viewer, key, value)
    frames: list[np.ndarray] = []
    done = [0]

    def take() -> None:
        if draw:
            frames.append(env.render())
        done[0] += 1
        if progress is not None:
            progress(1)

    take()  # slot 0 (run_episode's reset with the same seed starts the same episode)

    def grab(tr) -> None:
        if (tr.t + 1) % every == 0 or tr.t + 1 == n:
            take()

    ep = run_episode(env, acting if acting is not None else bound_agent(agent, env_id, kwargs), seed, on_step=grab)
    if (ep.steps % every) and ep.steps < n:  # ended early (terminated): keep the last slot too
        take()
    if progress is not None and done[0] < _frames_of(n, every):  # ended early: the frames it did not need
        progress(_frames_of(n, every) - done[0])
    env.close()
    return frames, viewer, int(ep.steps)


def record_episode(env_id: str, agent: str, seed: int = 0, *, horizon: int | None = None, every: int | None = None,
                   env_kwargs: dict | None = None, shared_scale: tuple[float, float] | None = None,
                   end_slot: int | None = None, shared_totals: tuple[float, float] | None = None,
                   progress: Callable[[int], None] | None = None, acting=None,
                   label_apart: bool = False) -> list[np.ndarray]:
    """The viewer's frames of ``agent``'s episode on instance ``seed`` (unless ``env_kwargs`` has a
    ``scenario_seed``) with dynamics seed ``seed``: after reset, then every ``every`` slots and at the end.
    ``shared_scale``/``shared_totals``/``end_slot``: the timeline's colour scale, the totals' y limits and the
    last slot, fixed (side-by-side replays). ``progress(k)``: called after every k frames. ``acting``: the agent
    object to run (made for these env kwargs; default: made from ``agent``). ``label_apart``: the agent's name
    on a line of its own above the title."""
    view = {"shared_scale": shared_scale, "end_slot": end_slot, "shared_totals": shared_totals,
            "label_apart": label_apart}
    return _run(env_id, agent, seed, horizon, every, env_kwargs, view, True, progress, acting)[0]


def episode_extent(env_id: str, agent: str, seed: int = 0, *, horizon: int | None = None,
                   env_kwargs: dict | None = None, every: int | None = None,
                   progress: Callable[[int], None] | None = None, acting=None) -> tuple:
    """``(colour scale, totals' y limits, slots run)`` of ``agent``'s episode: what its last frame asks for (the
    scale None when the viewer has no scaled timeline), the episode run once and drawn once, at its end."""
    _, viewer, steps = _run(env_id, agent, seed, horizon, every, env_kwargs, {}, False, progress, acting)
    _plt().close(viewer.figure())
    return viewer.natural_scale, viewer.natural_totals, steps


def shared_view(extents: list[tuple]) -> dict:
    """The view every panel of a side-by-side replay is drawn with, from each episode's :func:`episode_extent`:
    one colour scale covering every episode's (None if any viewer has none), totals' y limits covering every
    episode's, and the latest end slot."""
    def cover(spans):
        if any(s is None for s in spans):
            return None
        return (min(s[0] for s in spans), max(s[1] for s in spans))

    return {"shared_scale": cover([e[0] for e in extents]), "shared_totals": cover([e[1] for e in extents]),
            "end_slot": max(e[2] for e in extents)}


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


def check_fps(fps) -> float:
    """``fps`` as a float, or ValueError when an animation cannot be written at that rate (:data:`FPS_RANGE`)."""
    lo, hi = FPS_RANGE
    if isinstance(fps, bool) or not isinstance(fps, (int, float)) or not math.isfinite(fps) or not lo <= fps <= hi:
        raise ValueError(f"fps={fps} is invalid: expected a number of frames per second from {lo:g} to {hi:g}")
    return float(fps)


def _reserve(out: str, overwrite: bool) -> tuple[str, bool, int | None]:
    """The temporary file beside ``out`` the animation is written to, whether ``out`` existed, and the inode of
    the placeholder made for it (None: none made). Without
    ``overwrite``, ``out`` is created now, exclusively (an empty placeholder, replaced when the animation is
    complete): of two replays started on one file name, exactly one writes it, the other fails here."""
    if os.path.isdir(out):
        raise ValueError(f"out={out!r} is a folder; expected a file name")
    existed = os.path.lexists(out)
    exists_msg = f"{out!r} exists; pass --overwrite to replace it, or choose another file name"
    if existed and not overwrite:
        raise ValueError(exists_msg)
    folder = os.path.dirname(os.path.abspath(out))
    try:  # the temporary file is made now: a folder that cannot take it fails before the episode
        fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(out) + ".", suffix=".partial"
                                   + os.path.splitext(out)[1], dir=folder)
        os.close(fd)
    except OSError as exc:
        raise ValueError(f"cannot write {out!r}: cannot create a file in {folder!r} "
                         f"({exc.strerror or type(exc).__name__})") from None
    placeholder = None
    if not existed:
        try:
            fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            placeholder = os.fstat(fd).st_ino
            os.close(fd)
        except FileExistsError:
            os.remove(tmp)
            raise ValueError(exists_msg + " (another process created it just now)") from None
        except OSError as exc:
            os.remove(tmp)
            raise ValueError(f"cannot write {out!r}: {exc.strerror or type(exc).__name__}") from None
    return tmp, existed, placeholder


def replay(env_id: str, agents: list[str], out: str, seed: int = 0, *, horizon: int | None = None,
           every: int | None = None, fps: float = 8.0, env_kwargs: dict | None = None,
           overwrite: bool = False, progress: bool = False, estimate: Callable[[str], None] | None = None) -> str:
    """Write the animation of one agent's episode, or two agents' side by side, to ``out`` (.gif or .mp4).

    Each agent's env is built as :func:`clustergym.evaluate` builds it (:func:`~clustergym.runner.evaluation.
    planned_runs`): a trained model acts in an env with its padding and action kwargs, on the instance it was
    trained on if it has one, beside the other agent on the same instance and seed. An env's
    ``viewer_env_kwargs`` are on (e.g. P1's per-slot oracle, which its viewer draws as a reference; the agents
    never see it). ``progress``: a bar over the frames. ``estimate``: called with the expected time
    (:func:`replay_estimate`) before the episodes run.

    Every argument is checked before the episode runs. An existing ``out`` is refused unless ``overwrite``
    (and a new one is created exclusively, :func:`_reserve`); the animation is written to a temporary file
    beside ``out`` and moved into place only when complete, so an error, an interruption or a full disk
    leaves an earlier file as it was."""
    if not 1 <= len(agents) <= 2:
        raise ValueError(f"agents={agents!r} is invalid: expected one agent or two (side by side)")
    ext = os.path.splitext(out)[1].lower()
    if ext not in (".gif", ".mp4"):
        raise ValueError(f"out={out!r} is invalid: expected a .gif or .mp4 file name")
    fps = check_fps(fps)
    if horizon is not None and horizon < 1:
        raise ValueError(f"horizon={horizon} is invalid: expected an integer >= 1")
    if every is not None and every < 1:
        raise ValueError(f"every={every} is invalid: expected an integer >= 1 (slots between frames)")
    check_writer(ext)
    if os.path.isdir(out):
        raise ValueError(f"out={out!r} is a folder; expected a file name")
    if os.path.lexists(out) and not overwrite:
        raise ValueError(f"{out!r} exists; pass --overwrite to replace it, or choose another file name")
    probe = make_env(env_id, **(env_kwargs or {}))
    horizon = int(probe.unwrapped.horizon) if horizon is None else horizon
    # the kwargs the env's viewer draws its references with (e.g. P1's per-slot oracle); the user's own win
    env_kwargs = {**getattr(probe.unwrapped, "viewer_env_kwargs", {}), **(env_kwargs or {})}
    probe.close()
    check_memory(2.0 * len(agents) * _frames_of(int(horizon), every) * FRAME_BYTES + 64.0 * horizon,
                 f"horizon={horizon}", f"the frames of {len(agents)} episode(s)")
    # each agent's env as clustergym run builds it (a model's padding and action kwargs), and the models loaded
    tasks, made = planned_runs(env_id, agents, [seed], int(horizon), env_kwargs, score=False)
    if estimate is not None:
        estimate(replay_estimate(tasks, every, made))
    tmp, existed, placeholder = _reserve(out, overwrite)
    try:
        frames = _animation(tasks, every, progress, made)
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
        _discard(tmp, out, placeholder)
        raise
    return out


WARM_SLOTS = 10  # slots each agent is timed on before a replay (its decisions and the env's steps)


def replay_estimate(tasks: list[tuple], every: int | None, made: dict | None = None) -> str:
    """The expected time of :func:`replay`'s runs ``tasks``, from a timed warm-up on envs of their own (the
    replay's episodes are untouched): each agent's first :data:`WARM_SLOTS` slots, and one viewer frame drawn.
    A side-by-side replay runs each episode twice (undrawn for the shared scales, then drawn)."""
    import time

    horizon = int(tasks[0][3])
    if horizon <= WARM_SLOTS:  # the warm-up would be the replay itself, timed twice
        return (f"expected replay time: not estimated for {len(tasks)} episode(s) of {horizon:,} slot(s) (a short "
                f"replay: timing it would take as long as the replay)")
    passes = 1 if len(tasks) == 1 else 2
    total, frame_s = 0.0, 0.0
    for env_id, agent, seed, h, kwargs in tasks:
        env, _ = _env(env_id, seed, h, kwargs)
        acting = bound_agent(agent, env_id, kwargs, (made or {}).get(agent))
        warm = min(WARM_SLOTS, horizon)
        stamps: list[float] = []
        t0 = time.perf_counter()
        run_episode(env, acting, seed, max_steps=warm, on_step=lambda tr: stamps.append(time.perf_counter()))
        # per slot: between the first and the last slot (the reset and the first call's set-up left out)
        per = (stamps[-1] - stamps[0]) / (len(stamps) - 1) if len(stamps) > 1 else time.perf_counter() - t0
        total += passes * horizon * per
        env.render()  # the first frame sets the figure up; the second is what every later frame costs
        t0 = time.perf_counter()
        env.render()
        frame_s = max(frame_s, time.perf_counter() - t0)
        env.close()
    frames = _frames_of(horizon, every) * len(tasks)
    total += frames * frame_s
    return (f"expected replay time: about {describe_duration(total)} ({len(tasks)} episode(s) of {horizon:,} slots"
            f"{', each run twice' if passes == 2 else ''}, {frames:,} frames drawn; timed on the first {warm} "
            f"slot(s) and one frame)")


def _discard(tmp: str, out: str, placeholder: int | None) -> None:
    """Remove the temporary file, and the placeholder :func:`_reserve` made if it is still there, empty."""
    try:
        os.remove(tmp)
    except OSError:
        pass
    try:
        st = os.lstat(out)
        if placeholder is not None and st.st_ino == placeholder and st.st_size == 0:
            os.remove(out)
    except OSError:
        pass


def _animation(tasks: list[tuple], every: int | None, progress: bool, made: dict | None = None) -> list[np.ndarray]:
    """The frames of the runs ``tasks`` (:func:`~clustergym.runner.evaluation.planned_runs`), side by side for
    two, behind a progress bar over the frames (each episode of a side-by-side replay is run twice: once
    undrawn for the shared view, then drawn)."""
    from tqdm.auto import tqdm

    horizon = int(tasks[0][3])
    per = _frames_of(horizon, every)
    passes = 1 if len(tasks) == 1 else 2
    bar = tqdm(total=per * len(tasks) * passes, unit="frame", leave=False, dynamic_ncols=True,
               disable=None if progress else True)  # None: shown on a terminal only, not in a log or a pipe
    try:
        acting = [bound_agent(agent, env_id, kwargs, (made or {}).get(agent))  # each reset at every episode
                  for env_id, agent, _, _, kwargs in tasks]
        view: dict = {}
        if len(tasks) == 2:  # both panels drawn with one colour scale, totals scale and time axis
            extents = []
            for (env_id, agent, seed, h, kwargs), a in zip(tasks, acting):
                bar.set_description_str(f"{agent} (undrawn, for the shared scales)")
                extents.append(episode_extent(env_id, agent, seed, horizon=h, env_kwargs=kwargs, every=every,
                                              progress=bar.update, acting=a))
            view = shared_view(extents)
        # a long name (a model's path) on a line of its own, in every panel alike so that they line up
        view["label_apart"] = max(len(t[1]) for t in tasks) > LABEL_INLINE
        runs = []
        for (env_id, agent, seed, h, kwargs), a in zip(tasks, acting):
            bar.set_description_str(agent)
            runs.append(record_episode(env_id, agent, seed, horizon=h, every=every, env_kwargs=kwargs,
                                       progress=bar.update, acting=a, **view))
    finally:
        bar.close()
    return runs[0] if len(runs) == 1 else side_by_side(runs[0], runs[1])


def _write(path: str, frames: np.ndarray, ext: str, fps: float) -> None:
    import imageio.v3 as iio

    if ext == ".gif":
        iio.imwrite(path, frames, extension=".gif", duration=1000.0 / fps, loop=0)
    else:  # padded (white) to whole 16-pixel blocks, as video codecs want, rather than resized by the writer
        h, w = frames.shape[1:3]
        frames = np.pad(frames, ((0, 0), (0, -h % 16), (0, -w % 16), (0, 0)), constant_values=255)
        iio.imwrite(path, frames, extension=".mp4", fps=fps)
