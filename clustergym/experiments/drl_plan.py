"""What the learned-scheduler benchmark (``clustergym drl``) runs: the learners of every env, their budgets,
training seeds and held-out instances (:data:`PLAN`), and the CI-sized ``--quick`` variant (:data:`QUICK`)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

from clustergym.core.agent import list_agents
from clustergym.core.family import env_family, family_spec
from clustergym.learning.hyperparams import tuning_dir

__all__ = ["Learner", "EnvPlan", "PLAN", "HORIZON", "QUICK", "FULL_OUT", "TRAIN_SEED_OFFSET", "MAIN_BUDGET",
           "ABLATION_BUDGET", "HELD_OUT", "EVAL_SEEDS", "UNTUNED_PPO", "VALIDATION_ABLATION"]

HORIZON = 200  # slots per training episode and per evaluation run (P3's default; P1, P2, P4 default to 2000)
TRAIN_SEED_OFFSET = 100  # training seed s trains with SB3 seed 100 + s (envs 100+s, 101+s, ...): disjoint from
# the evaluation dynamics seeds (0-14), so no training episode replays an evaluation run's arrivals


@dataclass(frozen=True)
class Learner:
    """One row of the tables: an algorithm with its ``train`` options and step budget (env steps).

    A *main* row (``ablation == ""``) is a learner the benchmark puts forward: it is scored beside the paper
    policy and the baselines at the training horizon and at the env's default horizon, and ``--export-pretrained``
    chooses among these rows. An *ablation* row changes one thing of its ``base`` row (``ablation`` names what:
    discount, action mode, network, pool size, pool parameters, budget, tuning, update size, warm start) and is
    reported as the paired difference to it on the same held-out runs."""

    name: str
    algo: str
    budget: int
    options: dict = field(default_factory=dict)  # clustergym.learning.training.TrainConfig fields
    quick_budget: int = 1024
    note: str = ""
    ablation: str = ""  # "" = a main row; else the factor this row changes relative to ``base``
    base: str = ""  # the row of the same env this one is compared with (ablation rows)

    def config(self, quick: bool) -> dict:
        opts = self.options
        if quick and self.algo in ("ppo", "maskable_ppo"):  # two short rollouts, so the quick curve has an update
            opts = {**opts, "hyperparams": {**opts.get("hyperparams", {}), "n_steps": 128, "batch_size": 128}}
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
    default_horizon: int | None = None  # also evaluated at this horizon (the env's default): main rows, the paper
    # policy, the best baseline at the training horizon and random; None: the training horizon is the default
    env_kwargs: dict = field(default_factory=dict)  # the env's settings for training and every evaluation of this
    # plan (a named scenario, e.g. {"scenario": "gpu-short"}); {}: the env's defaults
    pretrained_name: str = ""  # the folder of ``--export-pretrained`` under pretrained/; "": the env's name
    ships_model: bool = True  # False: an ablation study whose learners ``--export-pretrained`` never ships
    score_reference: str = ""  # where the runs carry no bound: the agent a score puts at 1 (random at 0); "": the
    # paper policy. Set where the paper policy is not above random (the score would divide by a negative gap).
    extra_references: tuple[str, ...] = ()  # non-learned agents evaluated beside the registered ones and the paper
    # policy's option rows (a warm start's teacher with its options), so a learner is also compared with them
    episode_bound: bool = False  # where the runs carry no bound: score the gap table against each instance's
    # episode bound (the leaderboard's ``episode_bound``: P3's window bound), computed from the hidden truth

    def main_rows(self) -> tuple[Learner, ...]:
        return tuple(lr for lr in self.learners if not lr.ablation)

    def references(self) -> list[str]:
        """The non-learned agents this plan's learners are compared with: the paper policy, the family's
        registered agents, the paper policy's option rows the family names (hook ``REFERENCE_OPTIONS``), then the
        plan's own (``extra_references``: a warm start's teacher with its options)."""
        spec = family_spec(env_family(self.env_id))
        return list(dict.fromkeys([spec.paper_agent, *list_agents(self.env_id),
                                   *(spec.hook("REFERENCE_OPTIONS") or ()), *self.extra_references]))

    def eval_role(self) -> str:
        """What the evaluation instances are: "held-out" (the benchmark's) or "validation" (an ablation study
        scored where training options are chosen)."""
        return "held-out" if self.eval_instances is None or set(self.eval_instances) <= set(HELD_OUT) else "validation"


MAIN_BUDGET = 1_000_000  # env steps of a main row (a cell: about 4-8 min on this 2-core machine)
ABLATION_BUDGET = 100_000  # env steps of an ablation row and of its base (the "budget" row compares the two)
HELD_OUT = tuple(range(15))  # the evaluation instances (scenario seeds), disjoint from the pool and validation
EVAL_SEEDS = (0, 1)  # dynamics seeds of every held-out instance
CURVE_INSTANCES = tuple(range(910, 915))  # learning curves: validation instances (not the tuning ones, 900-909)
POOL_SMALL = tuple(range(1000, 1010))  # the pool-size ablation: 10 training instances instead of 100
PARAM_DRAWS = 8  # the pool-parameters ablation: generator settings drawn from the family's ranges (learning.pools)

# The hyperparameters every env trained with before tuning (the shared PPO setting; the discount per problem,
# chosen on validation instances): the "untuned" rows pin them, so they do not follow the tuned yml entries.
UNTUNED_PPO = {"n_steps": 512, "batch_size": 256, "n_epochs": 10, "learning_rate": 0.0003, "gae_lambda": 0.95,
               "clip_range": 0.2, "ent_coef": 0.0}
_UNTUNED_GAMMA = {"p1": 0.0, "p2": 0.0, "p3": 0.99, "p4": 0.99}


UPDATE_KL = 0.01  # the update-size row's target KL: SB3 ends an update's epochs once the approximate KL of the
# policy change passes 1.5 x this (CartPole's updates in the shared setting stay near it; benchmarks/drl_learning_stats.py)


def study_best(env_id: str, stem: str) -> dict | None:
    """The best trial's values of the shipped tuning record ``<stem>.json`` of ``env_id``'s family (its
    ``hyperparams/tuning/``, :func:`clustergym.learning.hyperparams.tuning_dir`; None: not shipped)."""
    folder = tuning_dir(env_id)
    path = None if folder is None else os.path.join(folder, f"{stem}.json")
    if path is None or not os.path.exists(path):
        return None
    with open(path) as f:
        return dict(json.load(f)["best"]["params"])


def tuned_row(env_id: str, name: str, stem: str, base: str, options: dict | None = None) -> tuple[Learner, ...]:
    """The "tuning" ablation row of a learner whose entry is not tuned: ``base``'s options with the best trial of
    the study ``stem`` (its record shipped in the family's ``hyperparams/tuning/``); no row while the record is not
    shipped."""
    best = study_best(env_id, stem)
    if best is None:
        return ()
    return (Learner(name, "ppo", ABLATION_BUDGET, {**(options or {}), "hyperparams": best}, ablation="tuning",
                    base=base, note=f"the best trial of the tuning study (hyperparams/tuning/{stem}.json) instead of "
                                    "the base's values"),)


def params_row(name: str, base: str, options: dict | None = None) -> Learner:
    """The "pool parameters" ablation row of ``base``: its options, trained on a pool whose generator parameters
    are drawn too (:data:`PARAM_DRAWS` settings of the family's load and value-law ranges, one per episode)."""
    return Learner(name, "ppo", ABLATION_BUDGET, {**(options or {}), "param_draws": PARAM_DRAWS},
                   ablation="pool parameters", base=base,
                   note=f"each episode's generator parameters drawn from {PARAM_DRAWS} settings of the family's ranges "
                        "(load, value law; PARAM_RANGES of the family's drl_hooks) instead of the defaults")


def _rows(key: str, *, discount: float, action_mode: tuple[str, dict, str] | None, entity: bool,
          warm_start: str | None = None, tuned: bool = True, update_size: bool = False,
          extra_main: tuple[Learner, ...] = (), extra_ablation: tuple[Learner, ...] = ()) -> tuple[Learner, ...]:
    """The main row (``ppo``, the yml entry: tuned where a tuning record exists) and its ablation rows, every
    ablation at :data:`ABLATION_BUDGET` against ``ppo-100k`` (the main row's learner at that budget); no
    "tuning" row where the entry is not tuned (it would repeat the base)."""
    base = "ppo-100k"
    rows = [Learner("ppo", "ppo", MAIN_BUDGET, quick_budget=2048,
                    note="the hyperparameter file's entry (tuned values where its tuning record is shipped)"),
            *extra_main,
            Learner(base, "ppo", ABLATION_BUDGET, ablation="budget", base="ppo",
                    note=f"the main row's learner at {ABLATION_BUDGET:,} env steps; the base of every other ablation")]
    if tuned:
        rows.append(Learner("ppo-100k-untuned", "ppo", ABLATION_BUDGET,
                            {"hyperparams": {**UNTUNED_PPO, "gamma": _UNTUNED_GAMMA[key]}}, ablation="tuning",
                            base=base, note="the shared PPO setting every env trained with before tuning"))
    rows += [Learner(f"ppo-100k-gamma{discount:g}", "ppo", ABLATION_BUDGET, {"hyperparams": {"gamma": discount}},
                     ablation="discount", base=base, note=f"discount {discount:g} instead of the entry's"),
             Learner("ppo-100k-pool10", "ppo", ABLATION_BUDGET, {"instances": list(POOL_SMALL)}, ablation="pool size",
                     base=base, note="10 training instances (1000-1009) instead of 100 (1000-1099)"),
             params_row(f"ppo-100k-params{PARAM_DRAWS}", base)]
    if action_mode is not None:
        name, kwargs, note = action_mode
        rows.append(Learner(f"ppo-100k-{name}", "ppo", ABLATION_BUDGET, kwargs, ablation="action mode", base=base,
                            note=note))
    if entity:
        rows.append(Learner("ppo-100k-entity", "ppo", ABLATION_BUDGET, {"net": "entity"}, ablation="network",
                            base=base, note="the per-entity network (shared weights, pooling) instead of the flat MLP"))
    if update_size:
        rows.append(Learner(f"ppo-100k-kl{UPDATE_KL:g}", "ppo", ABLATION_BUDGET,
                            {"hyperparams": {"target_kl": UPDATE_KL}}, ablation="update size", base=base,
                            note=f"each update stops once its approximate KL passes 1.5 x {UPDATE_KL:g} (the base's "
                                 "updates move the policy several times further; see the learning statistics)"))
    if warm_start is not None:  # the teacher acts in the paper's action: the row's base is the action-mode row
        assert action_mode is not None
        name, kwargs, _ = action_mode
        rows.append(Learner(f"bc({warm_start})+ppo-100k-{name}", "ppo", ABLATION_BUDGET,
                            {**kwargs, "warm_start": warm_start}, ablation="warm start", base=f"ppo-100k-{name}",
                            note=f"behaviour cloning of {warm_start} on training instances (in its own action, "
                                 f"action_mode={name!r}), then fine-tuning"))
    return tuple(rows) + tuple(extra_ablation)


# P4's second main row: the per-entity network with the shared PPO step sizes. With the tuned ones (learning rate
# 3.6e-5, 3 epochs) the network stays at its starting policy, Fair's constant action (KL 0.002 per update); with
# these it moved above Fair on validation instances 900-909 (one training seed, benchmarks/drl_headroom.py). At
# 1,000,000 steps (a cell: about 25 min here) its final validation totals were above the 100,000-step models' on
# all three training seeds (395.1 against 390.2), so the main row trains the full budget.
_P4_ENTITY_OPTIONS = {"net": "entity", "hyperparams": {"learning_rate": 0.0003, "n_epochs": 10, "n_steps": 512,
                                                       "batch_size": 256}}
P4_ENTITY = Learner("ppo-entity-1m", "ppo", MAIN_BUDGET, _P4_ENTITY_OPTIONS,
                    note="the per-entity network, learning rate 3e-4, 10 epochs, rollouts of 512 x 4 and batch 256 "
                         "(the rest of the tuned entry: gamma 0, lambda 0.9, clip 0.2), 1,000,000 env steps")

# P1's second main row: the per-entity network in the entry's setting (its network ablation row, put forward) at
# the main budget. At 100,000 steps it scored above ESDP's runs on the validation runs of the learning curves
# (instances 910-914); at 1,000,000 steps (a cell: about half an hour on an idle core, 161 s per 100,000 steps)
# its final validation totals were above the 100,000-step models' on all three training seeds (1,316.6 against
# 1,260.7), so the main row trains the full budget and the 100,000-step learner is its budget row.
P1_ENTITY = Learner("ppo-entity-1m", "ppo", MAIN_BUDGET, {"net": "entity"},
                    note="the per-entity network in the entry's setting (gamma 0, the shared PPO values), 1,000,000 "
                         "env steps")


# P1's per-entity main row trained where users run it: 2,000-slot episodes (the env's default horizon) instead
# of 200. The time feature stops growing at slot 199 either way (clustergym.core.env.TIME_CAP); what changes is
# the share of training slots late in a run, where the empirical statistics have settled. With gamma 0 the episode
# length changes nothing else of the update.
P1_ENTITY_LONG = Learner("ppo-entity-1m-h2000", "ppo", MAIN_BUDGET,
                         {**P1_ENTITY.options, "env_kwargs": {"horizon": 2000}}, ablation="episode length",
                         base=P1_ENTITY.name,
                         note="the per-entity main row trained on 2,000-slot episodes (the env's default horizon)")

# P4's per-entity main row trained where users run it. P4's state drifts over a long run: over slots 1,800-1,999
# of a 2,000-slot run the machines are used in 81% of slots, against at most 29% in 200-slot runs
# (tests/learning/test_time_features.py), so a model trained on 200-slot episodes meets at the default horizon a
# load it never trained on. This main row trains on 2,000-slot episodes and is scored at both horizons.
P4_ENTITY_LONG = Learner("ppo-entity-1m-h2000", "ppo", MAIN_BUDGET,
                         {**P4_ENTITY.options, "env_kwargs": {"horizon": 2000}},
                         note="the per-entity main row trained on 2,000-slot episodes (the env's default horizon)")


# P2's learners keep DRF's constant fractions (docs/drl.md, "What limits the learners"); the hindsight optimum
# is far above, and a policy that remembers each port's realised rewards could adapt within an episode, as
# OGASched does online. The row trains RecurrentPPO (an LSTM policy) with recurrent_ppo.yml's P2 entry: ppo.yml's
# tuned values, so it differs from ppo-100k by the memory only.
P2_MEMORY = Learner("ppo-100k-lstm", "recurrent_ppo", ABLATION_BUDGET, {}, ablation="memory", base="ppo-100k",
                    note="RecurrentPPO: an LSTM policy that acts on the episode so far (ppo.yml's tuned P2 values)")


def entity_budget_row(main: Learner) -> Learner:
    """The budget row ``ppo-entity`` of a per-entity main row: its learner at :data:`ABLATION_BUDGET`, the base of
    the per-entity ablations (tuning, pool parameters)."""
    return Learner("ppo-entity", "ppo", ABLATION_BUDGET, main.options, ablation="budget", base=main.name,
                   note="the per-entity main row's learner at 100,000 env steps; the base of the per-entity ablations")


P1_ENTITY_100K, P4_ENTITY_100K = entity_budget_row(P1_ENTITY), entity_budget_row(P4_ENTITY)

# P3 on the gpu-short scenario: the masked autoregressive decoder of ring sizes (learning/autoregressive.py) as the
# main row, with the discount 0.99 (on this cluster GADGET's per-slot optimum is not the best over a run, so a
# learner has to look ahead); its budget row, and the flat MLP at that budget as the network ablation.
P3S_TEACHER = "las[thresholds=continuous]"  # the first warm start's teacher: the best of the paper's baselines on gpu-short
# a teacher the decoder can copy: the same LAS with every job's size 3 (chosen on validation instances 900-904 among
# 1-5 workers; LAS's default draws each job's size at random, which no observation tells the clone)
P3S_TEACHER_W3 = "las[thresholds=continuous,workers=3]"
# SRPT's fixed size and row worth chosen on validation instances 900-909 (sizes 2-5; row worths 10, 30, 100, 300 at 3
# and 5 workers): every SRPT variant is above LAS with 3 workers there (docs/drl.md, "SRPT on gpu-short")
P3S_SRPT = ("srpt[workers=5]", "srpt[workers=5,row_value=30]")
_P3S_DECODER = {"net": "autoregressive", "env_kwargs": {"action_mode": "ring_size"}, "hyperparams": {"gamma": 0.99}}
_ATTAINED = {"policy_kwargs": {"order": "attained"}}  # the decoder decides the jobs least attained service first
_DENSITY = {"policy_kwargs": {"order": "density"}}  # the decoder decides the jobs in srpt[row_value=30]'s order
_FULL_STEP = {"learning_rate": 3e-4, "clip_range": 0.2}  # the base rows' PPO step (a warm start's default is smaller)


def _p3s_decoder(warm_start: str = "", **hyperparams) -> dict:
    """The options of a decoder row: ``_P3S_DECODER`` with ``hyperparams`` over its own and a warm start's teacher."""
    options = {**_P3S_DECODER, "hyperparams": {**_P3S_DECODER["hyperparams"], **hyperparams}}
    return {**options, "warm_start": warm_start} if warm_start else options


P3_GPU_SHORT_ROWS = (
    Learner("ppo-decoder", "ppo", MAIN_BUDGET, _P3S_DECODER, quick_budget=2048,
            note="the masked autoregressive decoder of ring sizes, gamma 0.99"),
    Learner("ppo-decoder-100k", "ppo", ABLATION_BUDGET, _P3S_DECODER, ablation="budget", base="ppo-decoder",
            note=f"the main row's learner at {ABLATION_BUDGET:,} env steps; the base of the network ablation"),
    Learner("ppo-decoder-100k-gamma0", "ppo", ABLATION_BUDGET,
            _p3s_decoder(gamma=0.0),
            ablation="discount", base="ppo-decoder-100k",
            note="discount 0 (the hyperparameter file's P3 value, chosen on the 50-server scenario) instead of 0.99; "
                 "the two compared on the curves' validation instances 900-904 decide the main row's discount"),
    Learner("ppo-100k-flat", "ppo", ABLATION_BUDGET,
            {"env_kwargs": {"action_mode": "ring_size"}, "hyperparams": {"gamma": 0.99}}, ablation="network",
            base="ppo-decoder-100k", note="the flat MLP over the same ring sizes (each job's size drawn on its own)"),
    Learner("bc(las-continuous)+ppo-decoder-100k", "ppo", ABLATION_BUDGET, _p3s_decoder(P3S_TEACHER),
            ablation="warm start", base="ppo-decoder-100k",
            note="behaviour cloning of the continuous LAS (the best of the paper's baselines on this scenario) on "
                 "training instances, then PPO fine-tuning of the decoder"),
    Learner("bc(las-continuous)+ppo-decoder-100k-fullstep", "ppo", ABLATION_BUDGET,
            _p3s_decoder(P3S_TEACHER, **_FULL_STEP),
            ablation="fine-tuning step", base="bc(las-continuous)+ppo-decoder-100k",
            note="the warm-start row fine-tuned with the base row's learning rate 3e-4 and clip range 0.2 instead of "
                 "the warm start's 1e-4 and 0.1"),
    Learner("ppo-decoder-100k-attained", "ppo", ABLATION_BUDGET,
            _p3s_decoder(**_ATTAINED),
            ablation="decoding order", base="ppo-decoder-100k",
            note="the decoder decides the jobs least attained service first (the continuous LAS's priority) instead "
                 "of oldest first"),
    Learner("bc(las-w3)+ppo-decoder-100k", "ppo", ABLATION_BUDGET, _p3s_decoder(P3S_TEACHER_W3),
            ablation="teacher", base="bc(las-continuous)+ppo-decoder-100k",
            note="the warm start from the continuous LAS with 3 workers per job (its sizes follow from what the "
                 "decoder sees) instead of sizes drawn at random"),
    Learner("bc(las-w3)+ppo-decoder-100k-attained", "ppo", ABLATION_BUDGET,
            _p3s_decoder(P3S_TEACHER_W3, **_ATTAINED),
            ablation="decoding order", base="bc(las-w3)+ppo-decoder-100k",
            note="the same warm start with the decoder deciding the jobs in its teacher's order (least attained first)"),
    Learner("bc(las-w3)+ppo-decoder-100k-attained-fullstep", "ppo", ABLATION_BUDGET,
            _p3s_decoder(P3S_TEACHER_W3, **_ATTAINED, **_FULL_STEP),
            ablation="fine-tuning step", base="bc(las-w3)+ppo-decoder-100k-attained",
            note="the attained-order warm start fine-tuned with the base row's learning rate 3e-4 and clip range 0.2"),
    Learner("bc(srpt-rv30)+ppo-decoder-100k-density", "ppo", ABLATION_BUDGET,
            _p3s_decoder(P3S_SRPT[1], **_DENSITY),
            ablation="teacher", base="bc(las-w3)+ppo-decoder-100k-attained",
            note="the warm start from srpt[workers=5,row_value=30] (above LAS with 3 workers on validation instances), "
                 "the decoder deciding the jobs in that teacher's order"),
    Learner("bc(srpt-rv30)+ppo-decoder-100k-density-fullstep", "ppo", ABLATION_BUDGET,
            _p3s_decoder(P3S_SRPT[1], **_DENSITY, **_FULL_STEP),
            ablation="fine-tuning step", base="bc(srpt-rv30)+ppo-decoder-100k-density",
            note="the SRPT warm start fine-tuned with the base row's learning rate 3e-4 and clip range 0.2"),
    Learner("bc(las-w3)+ppo-decoder-300k-attained-fullstep", "ppo", 300_000,
            _p3s_decoder(P3S_TEACHER_W3, **_ATTAINED, **_FULL_STEP),
            ablation="budget", base="bc(las-w3)+ppo-decoder-100k-attained-fullstep",
            note="the fine-tuned attained-order warm start at 300,000 env steps: does a longer fine-tuning pass its "
                 "teacher"),
)

# Privileged training (learning/privileged.py): each option one ablation row against the flat-MLP base it changes,
# all at ABLATION_BUDGET and scored on validation instances (VALIDATION_ABLATION), not on the held-out ones: these
# rows decide which training options are worth a main row, so they are measured where options are chosen.
VALIDATION_ABLATION = tuple(range(920, 935))  # 15 validation instances: not the pool, the held-out 0-14, the
# tuning instances 900-909 or the curves' 910-914
_PRIV_BASE = Learner("ppo-100k", "ppo", ABLATION_BUDGET,
                     note="the hyperparameter file's entry (flat MLP) at 100,000 env steps: the base of every row")


def _privileged_rows(options: tuple[tuple[str, dict, str, str], ...]) -> tuple[Learner, ...]:
    return (_PRIV_BASE, *(Learner(name, "ppo", ABLATION_BUDGET, opts, ablation=factor, base=_PRIV_BASE.name,
                                  note=note) for name, opts, factor, note in options))


P1_PRIVILEGED_ROWS = _privileged_rows((
    ("ppo-100k-critic", {"privileged": "critic"}, "privileged critic",
     "the critic also sees each channel's true mean utility (the actor reads the public observation only)"),
    ("ppo-100k-shaped", {"shaping": "oracle"}, "oracle shaping",
     "training reward minus the per-slot oracle's value (the knapsack optimum on the true means)"),
    ("bc(oracle)+ppo-100k", {"warm_start": "oracle"}, "oracle warm start",
     "behaviour cloning of the per-slot oracle's channels (on the true means) on training instances, then PPO"),
))
P2_PRIVILEGED_ROWS = _privileged_rows((
    ("ppo-100k-critic", {"privileged": "critic"}, "privileged critic",
     "the critic also sees each port's arrival probability (the actor reads the public observation only)"),
))
_PRIV_NOTE = ("Privileged-training ablation: the flat-MLP learner at 100,000 env steps against itself with one "
              "training option that reads the hidden truth (the policy still acts on public observations); scored "
              "on validation instances (920-934), not on the held-out ones. ")

PLAN: dict[str, EnvPlan] = {
    "p1": EnvPlan("p1", "clustergym/MultiServerChannel-v0", _rows("p1", discount=0.99, action_mode=None, entity=True,
                                                                   tuned=False, update_size=True,
                                                                   extra_main=(P1_ENTITY,),
                                                                   extra_ablation=(P1_ENTITY_100K, *tuned_row(
                                                                       "clustergym/MultiServerChannel-v0",
                                                                       "ppo-entity-tuned",
                                                                       "MultiServerChannel-v0-ppo-entity",
                                                                       "ppo-entity", {"net": "entity"}),
                                                                       params_row(f"ppo-entity-params{PARAM_DRAWS}",
                                                                                  "ppo-entity", P1_ENTITY.options),
                                                                       P1_ENTITY_LONG)),
        HELD_OUT, EVAL_SEEDS, CURVE_INSTANCES, (0,), default_horizon=2000,
        note="P1 has one action space (a channel subset, MultiBinary): no action-mode row."),
    "p2": EnvPlan("p2", "clustergym/MultiServerAllocation-v0", _rows(
        "p2", discount=0.99, entity=True,
        action_mode=("channel", {"env_kwargs": {"action_mode": "channel"}},
                     "the paper's action: one fraction per channel and device type (a 2,004-dim Gaussian)"),
        extra_ablation=(P2_MEMORY,)),
        HELD_OUT, EVAL_SEEDS, CURVE_INSTANCES, (0,), default_horizon=2000),
    "p3": EnvPlan("p3", "clustergym/RingAllReduce-v0", _rows(
        "p3", discount=0.99, entity=False, tuned=False, update_size=True,
        extra_ablation=tuned_row("clustergym/RingAllReduce-v0", "ppo-100k-tuned", "RingAllReduce-v0-ppo", "ppo-100k"),
        action_mode=("placement", {"env_kwargs": {"action_mode": "placement"}},
                     "GADGET's placement action (GPUs per job and server, 1,600 dimensions)")),
        None, tuple(range(30)), None, tuple(range(900, 905)), episode_bound=True,
        note=("P3 is evaluated on 30 held-out instances with instance = seed 0-29 (each its own topology and "
              "job stream; the env's reset seed changes neither, it seeds the policies' own draws); its curves on "
              "instance = seed 900-904. P3 has no per-entity network: no network row.")),
    "p3s": EnvPlan("p3s", "clustergym/RingAllReduce-v0", P3_GPU_SHORT_ROWS, None, tuple(range(30)), None,
                   tuple(range(900, 905)), env_kwargs={"scenario": "gpu-short"},
                   pretrained_name="RingAllReduce-v0-gpu-short", score_reference="gadget[rounding_repair=true]",
                   extra_references=(P3S_TEACHER_W3, *P3S_SRPT), episode_bound=True,
                   note=("P3 on its `gpu-short` scenario (the paper's cluster with 10 servers instead of 50: the GPUs "
                         "bind, GADGET is below the window bound and LAS beats it), every agent on it; 30 held-out "
                         "instances with instance = seed 0-29, curves on instance = seed 900-904, as for P3. Scores put "
                         "GADGET with repair at 1 (GADGET as written is below random in total here).")),
    "p4": EnvPlan("p4", "clustergym/ApproxJobs-v0", _rows(
        "p4", discount=0.99, entity=True, warm_start="fair", extra_main=(P4_ENTITY, P4_ENTITY_LONG),
        extra_ablation=(P4_ENTITY_100K, *tuned_row("clustergym/ApproxJobs-v0", "ppo-entity-tuned",
                                                     "ApproxJobs-v0-ppo-entity", "ppo-entity", P4_ENTITY.options),
                        params_row(f"ppo-entity-params{PARAM_DRAWS}", "ppo-entity", P4_ENTITY.options)),
        action_mode=("machine", {"env_kwargs": {"action_mode": "machine"}},
                     "the paper's action: a job per machine (Algorithm 1's form) instead of a level per job")),
        HELD_OUT, EVAL_SEEDS, CURVE_INSTANCES, (0,), default_horizon=2000),
    "p1-privileged": EnvPlan("p1-privileged", "clustergym/MultiServerChannel-v0", P1_PRIVILEGED_ROWS,
                             VALIDATION_ABLATION, EVAL_SEEDS, CURVE_INSTANCES, (0,),
                             ships_model=False,
                             note=_PRIV_NOTE + "Shaping and the warm start need a per-slot oracle: P1 has one."),
    "p2-privileged": EnvPlan("p2-privileged", "clustergym/MultiServerAllocation-v0", P2_PRIVILEGED_ROWS,
                             VALIDATION_ABLATION, EVAL_SEEDS, CURVE_INSTANCES, (0,), ships_model=False,
                             note=_PRIV_NOTE + "P2's oracle is a hindsight optimum over the whole run, not a per-slot "
                                               "one, so P2 has the critic row only."),
}

# Learner names become folder names inside sb3: agent specs, so none of the spec syntax ([ ] , =).
assert all(set(lr.name).isdisjoint("[],= ") for p in PLAN.values() for lr in p.learners)

# --quick: CI-sized; same learners and code paths, tiny budgets, 2 training seeds, short runs.
QUICK = {"horizon": 50, "seeds": (0, 1), "eval_seeds": (0,), "envs": ("p4",), "bc_steps": 400, "bc_epochs": 5,
         "out": "runs/drl-quick", "learners": ("ppo", "ppo-100k", "ppo-100k-machine", "bc(fair)+ppo-100k-machine",
                                                   "ppo-100k-critic", "ppo-100k-shaped", "bc(oracle)+ppo-100k"), "eval_instances": (0, 1, 2, 3, 4),
         "default_horizon": 100}
# --quick trains the main row, the ablations' base and the warm-started row (the code paths of both tables and of
# behaviour cloning), evaluates on instances 0-4 at seed 0 at 50 slots, and the main rows again at 100 slots.
FULL_OUT = "runs/drl"  # the default --out of the full benchmark (--quick has its own: QUICK["out"])
