"""Fig. 7 (table 1 of docs/gadget.md): GADGET / MILP optimum on 200 random per-slot instances."""
import numpy as np

from clustergym.agents.gadget import gadget_slot
from clustergym.envs.ringallreduce.oracle import ring_increments, solve_slot
from clustergym.envs.ringallreduce.slots import random_ring_slot

out = {"default": [], "alpha=1/3,rounds=1": []}
for seed in range(200):
    rng = np.random.default_rng(10_000 + seed)
    S, n = int(rng.integers(3, 13)), int(rng.integers(1, 7))
    topo, jobs = random_ring_slot(rng, S, n, cap_max=4, tight=seed % 2 == 0)
    opt, _ = solve_slot(topo, jobs["cap"], jobs["zeta"], jobs["z"], jobs["lam1"], jobs["lam2"], jobs["lam3"], jobs["bw"])
    if opt <= 1e-9:
        continue
    window = dict(present=np.ones(n, bool), cap=jobs["cap"], zeta=jobs["zeta"], attained=jobs["z"],
                  lam1=jobs["lam1"], lam2=jobs["lam2"], lam3=jobs["lam3"], bw=jobs["bw"])
    pi = ring_increments(jobs["cap"], jobs["zeta"], jobs["z"], jobs["lam1"], jobs["lam2"], jobs["lam3"])
    for name, kw in (("default", {}), ("alpha=1/3,rounds=1", dict(alpha=1/3, rounds=1))):
        y = gadget_slot(window, topo, np.random.default_rng(seed), **kw)
        out[name].append(sum(pi[j, y[j].sum()] for j in range(n)) / opt)
for k, v in out.items():
    v = np.array(v)
    print(k, len(v), "mean %.3f" % v.mean(), "pct10/25/50/75/90", np.round(np.percentile(v, [10, 25, 50, 75, 90]), 3), "min %.3f max %.4f" % (v.min(), v.max()), "share>=0.6 %.2f" % (v >= 0.6).mean())
