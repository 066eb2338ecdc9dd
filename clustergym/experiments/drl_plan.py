"""What the learned-scheduler benchmark (``clustergym drl``) runs: the learners of every env, their budgets,
training seeds and held-out instances (:data:`PLAN`), and the CI-sized ``--quick`` variant (:data:`QUICK`)."""

from __future__ import annotations

from dataclasses import dataclass, field
__all__ = ["Learner", "EnvPlan", "PLAN", "HORIZON", "QUICK", "FULL_OUT", "TRAIN_SEED_OFFSET"]

HORIZON = 200  # slots per training episode and per evaluation run (P3's default; P1, P2, P4 default to 2000)
TRAIN_SEED_OFFSET = 100  # training seed s trains with SB3 seed 100 + s (envs 100+s, 101+s, ...): disjoint from
# the evaluation dynamics seeds (0-14), so no training episode replays an evaluation run's arrivals


@dataclass(frozen=True)
class Learner:
    """One row of the table: an algorithm with its ``train`` options and step budget (env steps)."""

    name: str
    algo: str
    budget: int
    options: dict = field(default_factory=dict)  # clustergym.learning.training.train keyword arguments
    quick_budget: int = 1024
    note: str = ""

    def config(self, quick: bool) -> dict:
        opts = self.options
        if quick and self.algo in ("ppo", "maskable_ppo"):  # two short rollouts, so the quick curve has an update
            opts = {**opts, "hyperparams": {"n_steps": 128, "batch_size": 128, **opts.get("hyperparams", {})}}
        if quick and "warm_start" in opts:  # a short cloning phase: the same code path, not 20,000 teacher slots
            opts = {**opts, "bc_steps": QUICK["bc_steps"], "bc_epochs": QUICK["bc_epochs"]}
        return {"name": self.name, "algo": self.algo, "budget": self.quick_budget if quick else self.budget,
                "options": opts}


@dataclass(frozen=True)
class EnvPlan:
    """The learners of one env and its evaluation design (held-out instances x seeds)."""

    key: str
    env_id: str
    learners: tuple[Learner, ...]
    eval_instances: tuple[int, ...] | None  # None: instance = seed (one instance per seed), see P3
    eval_seeds: tuple[int, ...]
    curve_instances: tuple[int, ...] | None
    curve_seeds: tuple[int, ...]
    note: str = ""


# SAC on P2: the padded action has 336 x 6 = 2,016 dimensions; with SB3's default of one gradient step per env
# step SAC trained at 7 env-steps/s here (2,000 steps in 302 s), so one gradient step per 8 env steps.
_SAC_P2 = {"train_freq": 8, "gradient_steps": 1}

PLAN: dict[str, EnvPlan] = {
    "p1": EnvPlan("p1", "clustergym/MultiServerChannel-v0", (
        Learner("ppo", "ppo", 100_000),
        Learner("maskable_ppo", "maskable_ppo", 100_000),
        Learner("maskable_ppo+entity", "maskable_ppo", 50_000, {"net": "entity"},
                note="per-channel network with shared weights and pooling (clustergym.learning.entity)"),
        Learner("bc(esdp)+maskable_ppo", "maskable_ppo", 50_000, {"warm_start": "esdp", "bc_steps": 5_000},
                note=("behaviour cloning from ESDP on 5,000 slots of training instances (ESDP takes about 40 ms a "
                      "slot), then fine-tuning")),
    ), (0, 1, 2, 3, 4), (0, 1, 2), (0, 1, 2, 3, 4), (0,)),
    "p2": EnvPlan("p2", "clustergym/MultiServerAllocation-v0", (
        Learner("ppo", "ppo", 100_000),
        Learner("sac", "sac", 10_000, {"hyperparams": _SAC_P2}, quick_budget=256,
                note="one gradient step per 8 env steps (2,016 action dimensions)"),
        Learner("bc(drf)+ppo", "ppo", 100_000, {"warm_start": "drf", "env_kwargs": {"action_mode": "channel"}},
                note=("behaviour cloning from DRF (the best baseline at this horizon) on training instances, in the "
                      "paper's channel action (DRF's own)")),
    ), (0, 1, 2, 3, 4), (0, 1, 2), (0, 1, 2, 3, 4), (0,)),
    "p3": EnvPlan("p3", "clustergym/RingAllReduce-v0", (
        Learner("ppo", "ppo", 50_000),
        Learner("ppo-ring_size", "ppo", 50_000, {"env_kwargs": {"action_mode": "ring_size"}},
                note=("the action is a ring size per visible job, placed by the env's greedy ring placement "
                      "(action_mode='ring_size'; the paper policy and the baselines keep their placement action: "
                      "the dynamics are the same)")),
        Learner("bc(greedy)+ppo-ring_size", "ppo", 50_000,
                {"env_kwargs": {"action_mode": "ring_size"}, "warm_start": "greedy"},
                note="behaviour cloning from greedy's ring sizes, then fine-tuning, in ring_size mode"),
    ), None, tuple(range(15)), None, tuple(range(5)),
        note=("P3's instances (scenario seeds) differ only in the topology, which does not change any agent's "
              "total at the default load: the job list comes from the dynamics seed. So "
              "P3 is evaluated on 15 instances with instance = seed (each its own topology and job list), "
              "not on 5 instances x 3 seeds (which would be 3 job lists).")),
    "p4": EnvPlan("p4", "clustergym/ApproxJobs-v0", (
        Learner("ppo", "ppo", 100_000),
        Learner("maskable_ppo", "maskable_ppo", 100_000),
        Learner("bc(fair)+maskable_ppo", "maskable_ppo", 100_000, {"warm_start": "fair"},
                note="behaviour cloning from Fair (the best baseline at this horizon) on training instances"),
    ), (0, 1, 2, 3, 4), (0, 1, 2), (0, 1, 2, 3, 4), (0,)),
}

# Learner names become folder names inside sb3: agent specs, so none of the spec syntax ([ ] , =).
assert all(set(lr.name).isdisjoint("[],= ") for p in PLAN.values() for lr in p.learners)

# --quick: CI-sized; same learners and code paths, tiny budgets, 2 training seeds, short runs.
QUICK = {"horizon": 50, "seeds": (0, 1), "eval_seeds": (0,), "envs": ("p4",), "bc_steps": 400, "bc_epochs": 5,
         "out": "runs/drl-quick"}
FULL_OUT = "runs/drl"  # the default --out of the full benchmark (--quick has its own: QUICK["out"])
