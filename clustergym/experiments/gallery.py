"""The docs gallery (docs/gallery.md): one episode-viewer frame per env and one comparison figure per paper.

``python -m clustergym.experiments.gallery --out docs/figures/gallery`` (``make gallery``) writes

* ``viewer_<EnvName>.png``: the viewer frame (``render_mode="rgb_array"``) after the viewer slots of
  :func:`papers` of the paper's policy, instance 0, seed 0;
* ``paper_<env key>.png``: the paper's policy and the baselines of its family over ``INSTANCES`` instances
  (seed = instance, a short horizon): the running average reward, divided on each instance by the paper
  policy's average over the run, with its 95% interval over instances; beside it every agent's total
  reward relative to the paper's policy, paired over instances.

Every registered family with a paper policy (``FamilySpec.paper_agent``) and the hook ``GALLERY`` in its
``drl_hooks`` gets both, on its first env id.

These are pictures of the house style on short runs, not the papers' reproductions (``clustergym reproduce``).
"""

from __future__ import annotations

import argparse
import os

import numpy as np

from clustergym.core.family import family_specs
from clustergym.core.plots import agent_colors, figure, mean_band, plot_comparisons, save, style
from clustergym.runner.replay import record_episode
from clustergym.runner.evaluation import evaluate

__all__ = ["papers", "INSTANCES", "viewer_frame", "paper_figure", "main"]


def papers() -> dict[str, tuple[str, str, list[str], int, int]]:
    """env id -> (paper label, the paper's policy, baselines shown, horizon of the comparison, viewer slots) of every
    registered family with a ``paper_agent`` and the hook ``GALLERY`` (baselines, horizon, viewer slots), in
    registry order, on its first env id; the label is ``"<paper> (<number>)"``, e.g. ``"ESDP (P1)"``."""
    out = {}
    for spec in family_specs():
        gallery = spec.hook("GALLERY") if spec.paper_agent and spec.envs else None
        if gallery is not None:
            bases, horizon, slots = gallery
            out[spec.env_ids[0]] = (f"{spec.paper} ({spec.number})", spec.paper_agent, list(bases), int(horizon),
                                    int(slots))
    return out


INSTANCES = (0, 1, 2, 3, 4)


def viewer_frame(env_id: str, slots: int, agent: str, seed: int = 0) -> np.ndarray:
    """The viewer frame after ``slots`` slots of ``agent`` on instance ``seed`` with dynamics seed ``seed``."""
    return record_episode(env_id, agent, seed, horizon=slots, every=slots)[-1]


def paper_figure(env_id: str, path: str, progress: bool = False) -> str:
    """Average reward vs t (95% interval over instances) and paired differences to the paper's policy."""
    paper, ref, bases, horizon, _ = papers()[env_id]
    agents = [ref, *bases]
    res = evaluate(env_id, agents, seeds=list(INSTANCES), horizon=horizon, progress=progress, score=False)
    fig, (ax, bx) = figure(1, 2, size=(13, 4.2), gridspec_kw={"width_ratios": [1.25, 1]})
    # Instances differ in scale: each run's running average is divided by the paper policy's average over
    # the whole run on the same instance (common random numbers), so the bands show the paired picture.
    scale = {r.instance: r.total_reward / max(r.steps, 1) for r in res.runs if r.agent == ref}
    colors = agent_colors(agents)
    for a in [*bases, ref]:  # the paper's policy last, on top (a baseline can coincide with it)
        rs = [r for r in res.runs if r.agent == a and scale.get(r.instance, 0) > 0]
        if not rs:
            continue
        n = min(r.steps for r in rs)
        t = np.arange(1, n + 1)
        mean_band(ax, t, np.vstack([np.cumsum(r.reward[:n]) / t / scale[r.instance] for r in rs]), a, colors[a],
                  **({"lw": 2.6, "zorder": 3} if a == ref else {"lw": 1.4, "zorder": 2}))
    ax.axhline(1.0, color="0.3", lw=0.8, ls=":")
    ax.set(xlabel="time slot t", ylabel=f"average reward per slot / {ref}'s over the run",
           title=f"running average reward relative to {ref} (95% interval over {len(INSTANCES)} instances)")
    style(ax)
    plot_comparisons(bx, res.comparisons(reference=ref), colors)
    bx.set_title(f"total reward relative to {ref}, paired over instances")
    fig.suptitle(f"{paper}: {env_id.split('/')[-1]}, horizon {horizon}, instances {INSTANCES[0]}–{INSTANCES[-1]}")
    return save(fig, path)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m clustergym.experiments.gallery", description=__doc__.splitlines()[0])
    p.add_argument("--out", default="docs/figures/gallery")
    p.add_argument("--only", default=None, help="comma-separated env names, e.g. MultiServerChannel-v0")
    args = p.parse_args(argv)
    import imageio.v3 as iio

    os.makedirs(args.out, exist_ok=True)
    only = None if args.only is None else set(args.only.split(","))
    for env_id, (_, ref, _, _, slots) in papers().items():
        name = env_id.split("/")[-1]
        if only is not None and name not in only:
            continue
        frame = viewer_frame(env_id, slots, ref)
        iio.imwrite(os.path.join(args.out, f"viewer_{name}.png"), frame)
        print(f"wrote {os.path.join(args.out, f'viewer_{name}.png')}")
        print(f"wrote {paper_figure(env_id, os.path.join(args.out, f'paper_{name}.png'))}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
