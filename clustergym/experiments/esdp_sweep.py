"""The runs of the ESDP reproduction: the agents and baseline readings it compares, the study over instances
(:func:`run_study`, :func:`sweep`), the ρ study (:func:`rho_study`) and the two diagnostics computed beside the runs
from the hidden truth (:func:`true_mean_share`, :func:`phi_limit_regret`), which the claims, tables and figures of
:mod:`clustergym.experiments.esdp` read."""

from __future__ import annotations

import numpy as np

from clustergym.core.agent import make, public_info
from clustergym.envs.multiserver.channel.oracle import knapsack_max
from clustergym.envs.multiserver.channel.scenario import make_channel_scenario
from clustergym.runner.evaluation import evaluate
from clustergym.experiments import instances_for

__all__ = ["ENV_ID", "BASELINES", "MAIN_AGENTS", "G_LOG", "HAUF_READINGS", "SENSITIVITY", "RHO_AGENTS", "run_study", "sweep",
           "rho_study", "true_mean_share", "phi_limit_regret"]

ENV_ID = "clustergym/MultiServerChannel-v0"
BASELINES = ("hauf", "lcf", "lwtf")
MAIN_AGENTS = ("esdp", "esdp[only_active=true]", *BASELINES, "random")
# HAUF's readings of esdp.md §4 (baselines/multiserver_channel.py, class HAUF), the default first. The
# headline claims use the default: it reads the sentence literally ("ranks each port", "until (2)
# can not be satisfied", no word on untried channels). Every reading gets its own Fig. 2 and
# ESDP-vs-HAUF claim (:func:`clustergym.experiments.esdp.hauf_reading_rows`).
HAUF_READINGS = ("hauf", "hauf[skip_unfit=true]", 'hauf[rank="channels",skip_unfit=true]',
                 'hauf[rank="channels",untried="first",skip_unfit=true]')
# The other readings of the baselines (baselines/multiserver_channel.py): each beside its default.
SENSITIVITY = {
    "hauf": HAUF_READINGS[1:],
    "lcf": ("lcf[skip_unfit=true]", 'lcf[rank="jobs"]', 'lcf[rank="jobs",skip_unfit=true]'),
    "lwtf": ("lwtf[skip_unfit=true]",),
}
RHO_AGENTS = ("esdp", "esdp[only_active=true]", *BASELINES)
# ESDP (only_active) with g(t) = ln(t+1), the setting of Fig. 8 that "has an overwhelming advantage" (esdp.md §4.2):
# its regret beside the default g(t)'s (clustergym.experiments.esdp_regret).
G_LOG = 'esdp[g="log",only_active=true]'


def true_mean_share(instances, horizon: int, seed_of=lambda i: i, readings=HAUF_READINGS) -> dict:
    """HAUF's rule given the TRUE means ṽ instead of its estimates: Σ_t ṽᵀx(t) / Σ_t oracle(t), per
    reading and instance (a diagnostic, not an agent: it reads the hidden truth)."""
    import gymnasium as gym

    out = {r: {} for r in readings}
    for spec in readings:
        for inst in instances:
            env = gym.make(ENV_ID, horizon=horizon, scenario_seed=int(inst), oracle=True)
            agent = make(spec, env_id=ENV_ID)
            obs, info = env.reset(seed=int(seed_of(inst)))
            agent.reset(env.unwrapped.problem, seed=int(seed_of(inst)))
            agent.n[:] = 1  # v̂ = ṽ exactly (every channel counts as tried), and never updated
            agent.sum_z[:] = env.unwrapped.scenario.truth.mean_utility
            got = best = 0.0
            for _ in range(horizon):
                obs, _, _, _, info = env.step(agent.act(obs, public_info(info)))
                got += info["metrics"]["expected_reward"]
                best += info["metrics"]["oracle_reward"]
            out[spec][int(inst)] = got / best
    return out


def phi_limit_regret(instances, samples: int = 1000, seed: int = 0, **params) -> dict:
    """Per-slot regret of Algorithm 1's Φ(t)-then-drop rule with EXACT means, per instance.

    With exact means (and no exploration bonus), faithful ESDP's P4 solution is the best set over
    Φ(t), x_Φ = argmax_{Ax<=c} ṽᵀx, the same every slot; Algorithm 1 (lines 10–16) then drops the
    channels of ports without a job. Its per-slot regret E[max_{x∈Ω(t)} ṽᵀx − ṽᵀ(x_Φ ∧ active)] does
    not depend on t, so the regret of the rule grows linearly whenever it is > 0 (ρ < 1). Estimated
    over ``samples`` arrival draws Bernoulli(ρ_l) (a diagnostic: it reads the hidden truth);
    ``params`` override the paper scenario's parameters.
    """
    out = {}
    for inst in instances:
        sc = make_channel_scenario("paper", seed=int(inst), **params)
        pb, v = sc.problem, sc.truth.mean_utility
        _, x_phi = knapsack_max(v, pb.demand, pb.capacity)
        rng = np.random.default_rng(seed)
        gap = np.empty(samples)
        for k in range(samples):
            active_port = rng.random(pb.num_ports) < sc.truth.rho
            act = active_port[pb.edge_port]
            idx = np.flatnonzero(act)
            opt, _ = knapsack_max(v[idx], pb.demand[idx], pb.capacity)
            gap[k] = opt - v[x_phi & act].sum()
        out[int(inst)] = float(gap.mean())
    return out


def run_study(horizon: int, instances, workers: int, progress: bool, sensitivity: bool = True):
    """All agents on ``instances`` (a list of scenario seeds, or n for 0..n−1; seed = instance), one
    evaluate call; returns Results."""
    agents = list(MAIN_AGENTS)
    if sensitivity:
        agents += [a for v in SENSITIVITY.values() for a in v] + [G_LOG]
    insts = list(range(instances)) if isinstance(instances, int) else [int(i) for i in instances]
    return evaluate(ENV_ID, agents, insts, horizon, workers=workers, progress=progress)


def rho_study(rhos, horizon: int, n_instances: int, workers: int = 1, progress: bool = False) -> dict:
    """Faithful ESDP, ``only_active`` and the baselines at each job probability ρ_l = ρ (every port),
    instances 0..n−1, seed = instance: ``{ρ: Results}``. The paper's proof bounds the slots where some
    port has no job (eq. 35: the event that every port yields a job, probability Π_l ρ_l), so its claims
    are for ρ near 1; this measures where faithful ESDP stops beating the baselines."""
    return {float(r): evaluate(ENV_ID, list(RHO_AGENTS), list(range(n_instances)), horizon,
                               env_kwargs={"rho": float(r)}, workers=workers, progress=progress)
            for r in rhos}


QUICK_HORIZON, FULL_HORIZON, TINY_HORIZON = 300, 8000, 40


def sweep(quick: bool, workers: int, progress: bool, instances=None, tiny: bool = False) -> dict:
    """Every run and diagnostic the report needs: the study (:func:`run_study`), the faithful rule's
    regret with exact means (:func:`phi_limit_regret`) and HAUF given the true means (:func:`true_mean_share`).
    ``instances``: the scenario seeds (default ``experiments.instances_for(quick)``); ``tiny``: a few
    slots, for tests of the machinery."""
    insts = instances_for(quick, instances)
    horizon = TINY_HORIZON if tiny else QUICK_HORIZON if quick else FULL_HORIZON
    res = run_study(horizon, insts, workers, progress)
    limit = phi_limit_regret(insts, 20 if tiny else 300 if quick else 1000)
    share = true_mean_share(insts, min(horizon, 2000))
    return {"quick": quick, "tiny": tiny, "horizon": horizon, "n_inst": len(insts), "instances": insts, "res": res,
            "limit": limit, "share": share}
