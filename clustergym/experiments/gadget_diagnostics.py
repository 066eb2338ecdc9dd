"""Diagnostics of the GADGET reproduction that step the env themselves, beside the runner's runs: Fig. 7's ratio of
each agent's utility increment to the per-slot MILP optimum on the same slots (:func:`slot_ratios`), the utility
every arrived job would reach if it finished training, an upper bound on any agent's total (:func:`lam1_total`), and
the jobs left without a worker and the idle GPUs of a run (:func:`unserved_idle`)."""

from __future__ import annotations

import numpy as np

from clustergym.core.agent import make, public_info
from clustergym.envs.ringallreduce.env import RingAllReduceEnv
from clustergym.runner.episode import run_episode

__all__ = ["slot_ratios", "unserved_idle", "lam1_total"]


def slot_ratios(instances, horizon: int, seed: int = 0, agents=("gadget", "fifo", "random"), **env_kw) -> dict:
    """Fig. 7 on the same slots: per slot, each agent's utility increment / the MILP optimum of (10).

    The trajectory is driven by the first agent (GADGET); at every slot each agent decides on the
    *same* state (visible jobs, attained service), its decision is valued with the exact
    increments π_iκ, and the MILP (``milp.solve_slot``) gives the optimum of problem (10) for that
    state. Slots with optimum <= 1e-9 · max λ1 are skipped. Returns ``{agent: {instance: ratios}}``.
    """
    from clustergym.envs.ringallreduce.oracle import ring_increments, solve_slot

    out = {a: {} for a in agents}
    for inst in instances:
        env = RingAllReduceEnv(horizon=horizon, scenario_seed=inst, **env_kw)
        obs, info = env.reset(seed=seed)
        ags = [make(a, family="ringallreduce") for a in agents]
        for ag in ags:
            ag.reset(env.problem, seed=seed)
        for a in agents:
            out[a][inst] = []
        for _ in range(horizon):
            w = info["window"]
            pub = public_info(info)
            acts = [np.asarray(ag.act(obs, pub)).reshape(w["present"].shape[0], -1) for ag in ags]
            cap = np.where(w["present"], w["cap"], 0)
            opt, _ = solve_slot(env.problem.topology, cap, w["zeta"], w["attained"], w["lam1"], w["lam2"],
                                w["lam3"], w["bw"])
            if opt > 1e-9 * max(float(w["lam1"].max()), 1.0):
                pi = ring_increments(np.maximum(cap, 1), w["zeta"], w["attained"], w["lam1"], w["lam2"], w["lam3"])
                for a, y in zip(agents, acts):
                    k = y.sum(axis=1)
                    val = float(sum(pi[j, k[j]] for j in np.flatnonzero(k > 0)))
                    out[a][inst].append(val / opt)
            nxt, r, term, trunc, info = env.step(acts[0].reshape(-1))
            ags[0].update(obs, acts[0], r, nxt, public_info(info))
            obs = nxt
    return out


def unserved_idle(agent, seeds=(0, 1), horizon: int = 200, arrival_rate: float = 8.0, max_jobs: int = 64,
                  **env_kw) -> list[dict]:
    """Per run, mean over slots of visible jobs with budget left that get no
    worker, and of idle GPUs. ``agent`` is a spec (``"gadget"``) or an agent object; the run with
    seed s uses instance s (``scenario_seed=s``) unless ``env_kw`` pins one."""
    rows = []
    for s in seeds:
        kw = dict(scenario_seed=s, **env_kw)
        env = RingAllReduceEnv(horizon=horizon, arrival_rate=arrival_rate, max_jobs=max_jobs, **kw)
        ag = make(agent, family="ringallreduce") if isinstance(agent, str) else agent
        G = int(env.problem.topology.gpus.sum())
        uns, idle, total = [], [], 0.0

        def record(tr, G=G, uns=uns, idle=idle):
            nonlocal total
            w, y = tr.info["window"], tr.next_info["feedback"]["allocation"]
            uns.append(int((w["present"] & (w["cap"] > 0) & (y.sum(axis=1) == 0)).sum()))
            idle.append(G - int(y.sum()))
            total += tr.reward

        run_episode(env, ag, s, max_steps=horizon, on_step=record)
        rows.append(dict(seed=s, instance=kw["scenario_seed"], gpus=G, unserved=float(np.mean(uns)),
                         idle_gpus=float(np.mean(idle)), total_utility=total))
    return rows


def lam1_total(env_kwargs: dict, instances, horizon: int) -> dict:
    """``{instance: Σ_i λ_i,1}`` over the jobs that arrive in ``horizon`` slots (run with seed = instance, as
    :func:`clustergym.experiments.gadget.sweep` pairs them): the utility every job would reach if it finished
    training, an upper bound on any agent's total utility. Arrivals do not depend on the agent, so a run with no
    workers (every arrived job stays visible when ``max_jobs`` is above the arrivals) lists them all."""
    out = {}
    for inst in instances:
        env = RingAllReduceEnv(horizon=horizon, scenario_seed=int(inst), **env_kwargs)
        obs, info = env.reset(seed=int(inst))
        lam = {}
        zero = np.zeros(env.action_space.shape, dtype=np.int64)
        for _ in range(horizon):
            w = info["window"]
            lam.update(zip(w["id"][w["present"]].tolist(), w["lam1"][w["present"]].tolist()))
            obs, r, term, trunc, info = env.step(zero)
            if int(info["metrics"]["waiting_jobs"]) > 0:
                raise ValueError("lam1_total: max_jobs is below the arrivals (some jobs never visible)")
        out[int(inst)] = float(sum(lam.values()))
    return out
