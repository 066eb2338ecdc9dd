"""Generate the reference pages of the docs site from the code.

    python docs/gen_pages.py          # (re)write docs/envs/*.md, docs/agents/*.md, docs/cli.md
    python docs/gen_pages.py --check  # exit 1 and name the pages that are missing or out of date

Every fact on these pages comes from the code at generation time, never typed by hand:

* one page per registered env id (``gymnasium.registry``): the registration (entry points), the
  spaces with shapes and dtypes of an env built with the default arguments, the ``info`` keys
  (``feedback``, ``metrics``) observed in a short seeded rollout, the arguments with their defaults
  (constructor signature and the scenario generator's defaults) and the valid range each one is
  checked against (the message of the ``ValueError`` the env raises for an invalid value), then the
  class docstring (Description, spaces, Rewards, Info, Arguments, Version History), rendered by
  mkdocstrings;
* one page per registered agent name (``clustergym.agent.list_agents()``, one section per family
  when a name has several implementations): its equations (the ``EQUATIONS`` text below, with the
  paper's equation numbers), its options (``__init__`` signature, following ``**kwargs`` into the
  base classes the way ``make`` does), and its docstrings;
* the command-line reference from the argparse parser (``clustergym.cli.build_parser``).

``tests/project/test_docs.py`` runs ``--check``, so a page that drifts from the code fails the test suite.
"""

from __future__ import annotations

import argparse
import inspect
import os
import sys
import textwrap
import warnings

import numpy as np

DOCS = os.path.dirname(os.path.abspath(__file__))


def _paper_page(family: str) -> tuple[str, str, str]:
    """(paper, paper page, experiment) of a family, from its FamilySpec (the pages are written by hand)."""
    from clustergym.family import FAMILIES

    f = FAMILIES.get(family)
    return ("", "", "") if f is None else (f.paper, f.paper_file or "", f.experiment or "")


# The equations of each agent, with the paper's equation numbers (papers in ../shared/papers/).
# Keys are (name, family) or name for every family. Text in Markdown with Unicode math (the site
# renders offline, so no MathJax).
EQUATIONS: dict = {
    "esdp": """\
ESDP (esdp.md §3, Algorithms 1–2), per slot t:

* statistics of each channel e from the semi-bandit feedback: n_e(t) plays, v̂_e(t) sample mean
  (eqs. 8–9); σ̂²_e(t) = g(t) / (2 n_e(t)), +∞ when n_e(t) = 0 (eq. 10), with
  g(t) = ln t + 4 ln(ln t + 1) · max‖x‖₁ (eq. 11; default ln(t+1) + 4 ln(ln(t+1)+1)·α|E|);
* δ(t) = 1 / (ln(ln t + 1) + 1) (eq. 14), ξ(t) = ⌈max‖x‖₁ / δ(t)⌉ (eq. 18),
  Υ̂ = ⌈ξ(t) v̂(t)⌉ and Σ̂² = ⌈ξ(t)² σ̂²(t)⌉ (eqs. 16–17), S(t) = {0, 1, …, ξ(t)·max‖x‖₁} (eq. 19);
* P4(s, t) (eq. 20): x*(s, t) ∈ argmax Σ̂²ᵀx subject to the capacities (eq. 2), eq. 12 and
  Υ̂ᵀx ≥ s, for every s ∈ S(t), all by one dynamic program (Algorithm 2);
* s* ∈ argmax_{s∈S(t)} { s + √(Σ̂²ᵀ x*(s, t)) } (eq. 21), play x*(s*, t) with the channels of ports
  without a job set to 0 (Algorithm 1, lines 10–16).
""",
    "hauf": """\
HAUF / HSWF (esdp.md §4): ports with a job in descending Σ_{r∈R_l} v̂_(l,r) (historical mean
utilities), their channels selected in turn (within a port by descending v̂) until the capacity
constraint (eq. 2) cannot be satisfied. Readings as options: ``rank="channels"`` ranks channels by
their own v̂; ``untried="first"`` ranks untried channels first; ``skip_unfit`` fills first fit.
""",
    "lcf": """\
LCF (esdp.md §4): channels of ports with a job in ascending supply cost Σ_k f_k(a_k^e), selected in
turn until eq. 2 cannot be satisfied.
""",
    "lwtf": """\
LWTF (esdp.md §4): ports with a job in descending waiting time (slots since the port last got a
channel while it had a job), channels selected in turn until eq. 2 cannot be satisfied.
""",
    "ogasched": """\
OGASched (ogasched.md §3, Algorithm 1), per slot t with arrivals x(t):

* gradient (eq. 9): ∂q/∂y_(l,r)^k = x_l(t) ((f_r^k)'(y_(l,r)^k) − β_k) for k = k*, else
  x_l(t) (f_r^k)'(y_(l,r)^k), with k* = argmax_k β_k Σ_{r∈R_l} y_(l,r)^k (eq. 10);
* step and projection (eq. 11): y(t+1) = Π_Y(y(t) + η_t ∇q(x(t), y(t))), Π_Y the Euclidean
  projection onto {0 ≤ y ≤ a (eq. 3), Σ_{l∈L_r} y_(l,r)^k ≤ c_r^k (eq. 4)};
* step size: η_t = η₀ · decay^t (Table 1: η₀ = 25, decay = 0.9999), or, with ``lr="eq26"``,
  η_t = diam(Y) / (‖∇q(x(t), y(t))‖ √T) (eq. 26).
""",
    ("drf", "multiserver-allocation"): """\
DRF (ogasched.md §4): ports with a job in ascending dominant share
s_l = max_k a_l^k / Σ_{r∈R_l} c_r^k, each given what it requests while capacity lasts.
""",
    ("drf", "ringallreduce"): """\
DRF (gadget.md §VI baselines): jobs in ascending dominant share over GPUs and server-uplink
bandwidth, each with a fixed number of workers, placed by the env's greedy ring placement.
""",
    "fairness": """\
FAIRNESS (ogasched.md §4): each port l with a job gets the share a_l^k / Σ_{l'∈L_r} a_{l'}^k of
every (r, k).
""",
    "binpacking": """\
BINPACKING (ogasched.md §4, Kubernetes MostAllocated): servers with the highest utilisation after
placement first.
""",
    "spreading": """\
SPREADING (ogasched.md §4, Kubernetes LeastAllocated): servers with the lowest utilisation after
placement first.
""",
    "gadget": """\
GADGET (gadget.md §V): Algorithm 1 (temporal greedy) solves problem (10) each slot with
Algorithm 2 (LP-RS-MDE): bounds q_i from the continuous relaxation (constraints 2, 4, 11); ring
sizes κ_i = argmax_{κ∈Q_i: χ̄_iκ>0} π_iκ χ̄_iκ from the LP relaxation of problem (12), with
π_iκ = μ_i(ζ_i(z+κ)) − μ_i(ζ_i z); the embedding LP over mappings with GPU (eqs. 16, 18) and
bandwidth (eqs. 17, 19) capacities and Σ_k φ_i^k ≤ 1 (eq. 13); randomized rounding with u_b tries
(Alg. 2 lines 7–9). The module docstring below gives every step and the choices made.
""",
    "fifo": """\
FIFO (gadget.md §VI baselines): jobs in arrival order, a fixed number of workers each, placed by
the env's greedy ring placement (one server if possible, else one rack, else across racks).
""",
    "las": """\
LAS (gadget.md §VI baselines, Tiresias): jobs in ascending attained service (worker-slots so far),
fixed sizes, greedy ring placement. ``thresholds``: Tiresias' discretised queues (FIFO within a
queue).
""",
    "greedy": """\
Greedy (a reference policy for P3, not a paper baseline): every visible job at its full
size κ_i = min(N_i, budget left), ranked by its full-size increment π_iκi = μ_i(ζ_i(z_i + κ_i)) −
μ_i(ζ_i z_i) (the objective of problem (10)), descending, placed one pass in that order by the env's
greedy ring placement; a job that does not fit at full size waits.
""",
    "opm": """\
OPM (opm.md §V, Theorem 3), per slot t, for every visible job j and machine i:

* UCB estimate θ̂_i^t = min{1, θ̄_i^t + 2 rad(θ̄_i^t, n_i + 1)} (eqs. 66–67) with
  rad(ν, P) = √(γν/P) + γ/P (eq. 14);
* primal step y_j(t) = x_j(t−1) + α ∇_{x_j} L_{t−1}(x(t−1), λ(t)) (eq. 69) on the Lagrangian of
  eq. 68, then per machine the projection onto {z ≥ 0, Σ_j z_j ≤ 1} (P4, eqs. 70–71);
* randomized rounding with E[x̃_j^i(t)] = x_j^i(t) (eq. 72);
* dual update λ_j(t+1) = max{0, λ_j(t) + 2μ g_j(x_j(t)) − μ g_j(x_j(t−1))} (eq. 73).

Defaults are Theorem 3's: γ = ln(MT/δ), μ = √T/M, α = 1/(2√T), ε = 0.
""",
    "opm-noest": """\
OPM without machine estimations (opm.md §VI baseline): OPM (eqs. 68–73) with every θ̂_i equal to
``theta_const`` instead of the UCB estimate of eqs. 66–67.
""",
    "ops": """\
OPS (opm.md §IV, Algorithm 1), one job: UCB estimates θ̂^t (eqs. 12–14); dual update
λ(t) = max{0, λ(t−1) + 2μ g(x(t−1)) − μ g(x(t−2))} (eq. 20) with g(x) = Σ_i p_i x^i − (1−ε)B/T
(eq. 10); primal step x(t) = Π_[0,1]^M(x(t−1) + α(θ̂ f'(W/(t−1)) − λ p)) (eqs. 17–19);
independent rounding x̃^i ~ Bernoulli(x^i) (eq. 21). Defaults are Theorem 2's.
""",
    "fair": """\
Fair (opm.md §VI baseline): the machines are shared equally among the jobs with budget left.
""",
    "edf": """\
Deadline-aware (opm.md §VI baseline): jobs by earliest deadline d_j; each takes as many machines
as its remaining budget pays for.
""",
    "random": """\
Feasible random (not from a paper): the reference of the normalised score (random = 0, see
[Evaluation](../evaluation.md)). Each family has its own implementation below.
""",
}

# Modules whose docstring holds the agent's per-slot steps (rendered after the class docstring).
AGENT_MODULE_DOC = {"gadget", "opm", "opm-noest", "ops"}


# ----------------------------------------------------------------------------------------------
def _quiet():
    warnings.filterwarnings("ignore")
    import logging

    logging.getLogger("gymnasium").setLevel(logging.ERROR)


def _load(ep: str):
    import importlib

    mod, _, attr = ep.partition(":")
    return getattr(importlib.import_module(mod), attr)


def _short(env_id: str) -> str:
    return env_id.split("/", 1)[1]


def _space_rows(space, prefix: str = "") -> list[tuple[str, str, str, str]]:
    """(key, space, shape, dtype) rows of a (possibly Dict) space."""
    from gymnasium import spaces

    if isinstance(space, spaces.Dict):
        rows = []
        for k, s in space.spaces.items():
            rows += _space_rows(s, f"{prefix}{k}.")
        return rows
    name = prefix[:-1] if prefix else "(whole)"
    desc = type(space).__name__
    if isinstance(space, spaces.Box):
        lo, hi = np.unique(space.low), np.unique(space.high)
        lo_s = f"{lo[0]:g}" if lo.size == 1 else "per entry"
        hi_s = f"{hi[0]:g}" if hi.size == 1 else "per entry"
        desc = f"Box(low={lo_s}, high={hi_s})"
    elif isinstance(space, spaces.MultiDiscrete):
        nv = np.unique(space.nvec)
        desc = f"MultiDiscrete(nvec={nv[0]})" if nv.size == 1 else "MultiDiscrete(nvec per entry)"
    elif isinstance(space, spaces.Discrete):
        desc = f"Discrete({space.n})"
    return [(name, desc, str(tuple(space.shape)) if space.shape is not None else "-", str(space.dtype))]


def _value_desc(v, later=None) -> str:
    """Type of an info value; an array's shape only when it is the same at the first and last slot."""
    if isinstance(v, np.ndarray):
        if isinstance(later, np.ndarray) and later.shape != v.shape:
            return f"{v.dtype} array, {v.ndim}-d, length varies with the slot"
        return f"{v.dtype} array {tuple(v.shape)}"
    if isinstance(v, (list, tuple)):
        return f"{type(v).__name__} (len {len(v)})"
    if isinstance(v, dict):
        return "dict"
    if isinstance(v, (bool, np.bool_)):
        return "bool"
    if isinstance(v, (int, np.integer)):
        return "int"
    if isinstance(v, (float, np.floating)):
        return "float"
    return type(v).__name__


def _rollout_info(env_id: str, kwargs: dict, steps: int = 4):
    """Info keys of a short seeded rollout (first step and last step of a ``steps``-slot episode)."""
    import gymnasium as gym

    env = gym.make(env_id, horizon=steps, **kwargs)
    rng = np.random.default_rng(0)
    env.action_space.seed(0)
    obs, info0 = env.reset(seed=0)
    first, last = None, None
    for _ in range(steps):
        a = env.action_space.sample()
        if "action_mask" in info0 and a.shape == np.shape(info0["action_mask"]):
            a = (a * np.asarray(info0["action_mask"])).astype(a.dtype)
        obs, r, term, trunc, info0 = env.step(a)
        first = info0 if first is None else first
        last = info0
        if term or trunc:
            break
    env.close()
    del rng
    return first, last


def _probe(cls, name: str) -> str:
    """The valid values of argument ``name``, as the env's own check states them."""

    class _Bad:
        def __repr__(self):
            return "?"

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cls(**{name: _Bad()})
    except ValueError as e:
        msg = str(e)
        if "is invalid: " in msg:
            return msg.split("is invalid: ", 1)[1].removeprefix("expected ")
        return "see the docstring"
    except Exception:  # noqa: BLE001 - a check that is not a ValueError: say nothing invented
        return "see the docstring"
    return "not checked at construction"


def _summary(cls) -> str:
    """First paragraph of the class's own docstring (not one inherited from a base class), else of
    its module's docstring."""
    doc = cls.__dict__.get("__doc__") or sys.modules[cls.__module__].__doc__ or ""
    return inspect.cleandoc(doc).split("\n\n", 1)[0].replace("\n", " ")


def _md_escape(s: str) -> str:
    return s.replace("|", "\\|")


def _fmt_default(v) -> str:
    if v is inspect.Parameter.empty:
        return "required"
    return f"`{v!r}`"


def _scenario_defaults(cls) -> tuple[dict, tuple, str]:
    """(defaults, scenario names, module) of the scenario generator the env class uses."""
    mod = sys.modules[cls.__module__]
    for obj in vars(mod).values():
        if inspect.isfunction(obj) and obj.__name__.startswith("make_") and obj.__name__.endswith("_scenario"):
            smod = sys.modules[obj.__module__]
            names = next((v for k, v in vars(smod).items() if k.endswith("_SCENARIOS")), ())
            return dict(getattr(smod, "PAPER_DEFAULTS", {})), tuple(names), smod.__name__
    return {}, (), ""


# ----------------------------------------------------------------------------------------------
def _oracle_rule(cls) -> str:
    """The env's evaluation-only oracle rule, from its ``score_env_kwargs`` (the same rule for every env)."""
    on = ", ".join(f"`{k}={v!r}`" for k, v in getattr(cls, "score_env_kwargs", {}).items())
    head = "off in `gym.make` (`oracle=False`: a training env pays nothing for it); "
    if on:
        return head + (f"`clustergym run` / `reproduce` and `clustergym.evaluate` add {on} when they compute a "
                       "score or regret, unless given")
    return head + "a score does not turn it on (costly here); pass `oracle=True` (`--set oracle=true`) to get it"


def env_page(env_id: str) -> str:
    import gymnasium as gym

    from clustergym.agent import list_agents
    from clustergym.envs.multiagent import PARALLEL_ENVS

    spec = gym.spec(env_id)
    cls = _load(spec.entry_point)
    fam = cls.family
    short = _short(env_id)
    paper, paper_md, _ = _paper_page(fam)
    defaults, scen_names, smod = _scenario_defaults(cls)
    sig = inspect.signature(cls.__init__)

    # The summary opens the class docstring rendered under "Specification": not repeated here.
    out = [f"# {short}", ""]
    env = gym.make(env_id)
    rows = [
        ("Env id", f"`{env_id}`"),
        ("Make", f'`gym.make("{env_id}")` (after `import clustergym`)'),
        ("Problem family", f"`{fam}`"),
        ("Paper", f"{paper} ([paper page](../{paper_md}))"),  # docs/hooks.py: a page not written yet is text
        ("Entry point", f"`{spec.entry_point}`"),
        ("Vector entry point", f"`{spec.vector_entry_point}`" if spec.vector_entry_point else "none "
         "(use `gym.vector.SyncVectorEnv` / `AsyncVectorEnv`)"),
        ("Multi-agent version", f"`clustergym.envs.multiagent.parallel_env(\"{env_id}\")`"
         if env_id in PARALLEL_ENVS else "none"),
        ("max_episode_steps", f"`{spec.max_episode_steps}` (the episode is truncated by the env at `horizon`)"),
        ("Render modes", (", ".join(f"`{m}`" for m in env.metadata.get("render_modes", [])) or "none")
         + " ([episode viewer](../viewer.md))"),
        ("Evaluation oracle", _oracle_rule(cls)),
        ("Agents", ", ".join(f"[`{a}`](../agents/{a}.md)" for a in list_agents(env_id))),
    ]
    out += ["| | |", "|---|---|"] + [f"| {k} | {_md_escape(v)} |" for k, v in rows] + [""]

    out += ["## Specification", "",
            "The class docstring, which is the env's spec (Gymnasium's sections). The sections after it "
            "are measured on the code.", "",
            f"::: {cls.__module__}.{cls.__qualname__}", "    options:", "      heading_level: 2", ""]
    out += ["## Spaces at the default arguments", "",
            "Measured on `gym.make(\"%s\")`; the sizes follow the instance (|E|, |L|, numbers of servers, "
            "machines, visible jobs), so other arguments give other shapes." % env_id, ""]
    variants = [("", env)]
    if "action_mode" in sig.parameters:
        choices = cls.action_modes  # the env's action modes, the default first
        variants = [(f" (`action_mode=\"{m}\"`)", gym.make(env_id, action_mode=m)) for m in choices]
    for label, e in variants:
        rep = str(e.action_space)
        rep = rep if len(rep) <= 100 else f"{type(e.action_space).__name__}(shape={tuple(e.action_space.shape)})"
        out += [f"**Action space**{label}: `{rep}`", "",
                "| key | space | shape | dtype |", "|---|---|---|---|"]
        out += [f"| {k} | {_md_escape(d)} | {s} | {t} |" for k, s, t, d in
                [(r[0], r[2], r[3], r[1]) for r in _space_rows(e.action_space)]] + [""]
    out += ["**Observation space**:", "", "| key | space | shape | dtype |", "|---|---|---|---|"]
    out += [f"| {k} | {_md_escape(d)} | {s} | {t} |" for k, d, s, t in _space_rows(env.observation_space)] + [""]
    for _, e in variants:
        if e is not env:
            e.close()
    env.close()

    out += ["## Info keys", "",
            "Observed in a seeded 4-slot rollout with random actions at the default arguments "
            "(first slot; `episode_*` keys appear at the last slot). Agents get `info` without "
            "`metrics` (`clustergym.agent.public_info`); the runner reads `metrics` for evaluation "
            "(see [Evaluation](../evaluation.md) and the docstring below for their meaning).", "",
            "| key | type (shape as seen in that rollout) |", "|---|---|"]
    first, last = _rollout_info(env_id, {})
    for k, v in first.items():
        if isinstance(v, dict):
            for k2, v2 in v.items():
                out.append(f"| `{k}[\"{k2}\"]` | {_value_desc(v2, last.get(k, {}).get(k2))} |")
        else:
            out.append(f"| `{k}` | {_value_desc(v, last.get(k))} |")
    for k, v in last.get("metrics", {}).items():
        if k not in first.get("metrics", {}):
            out.append(f"| `metrics[\"{k}\"]` (last slot) | {_value_desc(v)} |")
    out.append("")

    from clustergym.metrics import reported_as

    out += ["## Metrics (declared)", "",
            "The keys `step` may put in `info[\"metrics\"]`, as the class attribute `metrics_spec` declares them "
            "(`clustergym/metrics.py`): *slot* = a value of that slot, *cumulative* = a running total since "
            "`reset`, *episode* = present at the last slot only. The runner aggregates each key by its kind "
            "([results.json schema](../results-schema.md)).", "",
            "| key | kind | meaning | in results.json `runs[]` |", "|---|---|---|---|"]
    out += [f"| `{k}` | {m.kind}{'' if m.shape == '()' else ' ' + m.shape} | {_md_escape(m.doc)} | {reported_as(k, m)} |"
            for k, m in cls.metrics_spec.items()] + [""]

    out += ["## Arguments: defaults and valid values", "",
            "Keyword arguments of `gym.make` (constructor arguments, then the scenario parameters of the "
            f"`paper` scenario, defaults from `{smod}.PAPER_DEFAULTS`). *Valid values* is what the env's "
            "own check says when given an invalid value (bounds that depend on another argument are "
            "shown at that argument's default).", "",
            "| argument | default | valid values |", "|---|---|---|"]
    seen = set()
    for p in sig.parameters.values():
        if p.name == "self" or p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL):
            continue
        seen.add(p.name)
        dflt = _fmt_default(p.default)
        if p.default is None and defaults.get(p.name) is not None:
            dflt += f" (then the scenario's: `{defaults[p.name]!r}`)"
        out.append(f"| `{p.name}` | {_md_escape(dflt)} | {_md_escape(_probe(cls, p.name))} |")
    for k, v in defaults.items():
        if k in seen:
            continue
        out.append(f"| `{k}` | {_md_escape(_fmt_default(v))} | {_md_escape(_probe(cls, k))} |")
    out.append("")
    if scen_names:
        out += ["Scenario names (`scenario=`): " + ", ".join(f"`{n}`" for n in scen_names)
                + ". The parameters above belong to `paper`; other named scenarios take their own "
                  "(the docstring and the paper page say which).", ""]

    if smod:
        out += ["## Scenario model", "", f"The docstring of `{smod}`: how the `paper` scenario is drawn, "
                "and the choices where the paper is ambiguous.", "", f"::: {smod}", "    options:",
                "      heading_level: 2", ""]
    return "\n".join(out)


def envs_index(env_ids) -> str:
    import gymnasium as gym

    out = ["# Environments", "",
           "Every id is registered when `clustergym` is imported. Each page follows Gymnasium's "
           "environment pages: the registration, the spaces with shapes and dtypes, the `info` keys, "
           "the arguments with defaults and valid ranges, and the class docstring (Description, "
           "Action Space, Observation Space, Rewards, Info, Arguments, Version History).", "",
           "| id | summary |", "|---|---|"]
    for i in env_ids:
        cls = _load(gym.spec(i).entry_point)
        s = _summary(cls)
        out.append(f"| [`{i}`]({_short(i)}.md) | {_md_escape(s)} |")
    return "\n".join(out) + "\n"


# ----------------------------------------------------------------------------------------------
def agent_page(name: str) -> str:
    import gymnasium as gym

    from clustergym.agent import _option_params
    from clustergym.family import agent_entry_points
    from clustergym.envs import ENV_IDS

    fam_env = {}
    for i in ENV_IDS:
        fam_env.setdefault(_load(gym.spec(i).entry_point).family, i)
    fams = agent_entry_points(name)
    first_cls = _load(next(iter(fams.values())))
    summary = _summary(first_cls)
    out = [f"# {name}", ""]
    if len(fams) == 1:
        out += [summary, ""]
    elif name in EQUATIONS:
        out += [EQUATIONS[name], ""]
    out += ["| family | env id | class |", "|---|---|---|"]
    for fam, ep in fams.items():
        env_id = fam_env.get(fam, "")
        out.append(f"| `{fam}` | [`{env_id}`](../envs/{_short(env_id)}.md) | `{ep}` |")
    some_env = fam_env.get(next(iter(fams)), "")
    out += ["", "Use it by name: `clustergym.agent.make(\"%s\", env_id=\"%s\")`, "
            "`clustergym run %s --agents %s`; options go in brackets, "
            "`%s[key=value,...]` (values parsed as JSON, checked against the types of the defaults)."
            % (name, some_env, some_env, name, name), ""]
    for fam, ep in fams.items():
        cls = _load(ep)
        if len(fams) > 1:
            out += [f"## Family `{fam}`", ""]
            eq = EQUATIONS.get((name, fam))
            if eq:
                out += ["**Equations.** " + eq, ""]
        else:
            eq = EQUATIONS.get((name, fam)) or EQUATIONS.get(name)
            if eq:
                out += ["## Equations", "", eq, ""]
        head = "###" if len(fams) > 1 else "##"
        opts = _option_params(cls)
        out += [f"{head} Options{' (' + fam + ')' if len(fams) > 1 else ''}", ""]
        if opts:
            out += ["| option | type | default |", "|---|---|---|"]
            for p in opts.values():
                ann = p.annotation if p.annotation is not inspect.Parameter.empty else ""
                ann = ann if isinstance(ann, str) else getattr(ann, "__name__", str(ann))
                out.append(f"| `{p.name}` | {_md_escape(f'`{ann}`' if ann else '')} | {_md_escape(_fmt_default(p.default))} |")
        else:
            out.append("None: the agent takes no options.")
        out += ["", f"{head} Docstring{' (' + fam + ')' if len(fams) > 1 else ''}", "",
                f"::: {ep.replace(':', '.')}", "    options:", f"      heading_level: {len(head) + 1}", ""]
        if name in AGENT_MODULE_DOC:
            out += [f"{head} Per-slot steps (module `{cls.__module__}`)", "", f"::: {cls.__module__}",
                    "    options:", f"      heading_level: {len(head) + 1}", ""]
    return "\n".join(out)


def agents_index(names) -> str:
    from clustergym.family import agent_entry_points

    out = ["# Agents", "",
           "Every agent name registered with `clustergym.register_agent` "
           "(`clustergym.list_agents()`), with the problem families it can act in. A name may "
           "have one implementation per family (`drf`, `random`). Your own agents: "
           "[Adding an agent](../extending.md).", "", "| agent | families |", "|---|---|"]
    for n in names:
        out.append(f"| [`{n}`]({n}.md) | {', '.join(f'`{f}`' for f in agent_entry_points(n))} |")
    return "\n".join(out) + "\n"


# ----------------------------------------------------------------------------------------------
def cli_page() -> str:
    from clustergym.cli import build_parser

    os.environ["COLUMNS"] = "100"  # argparse wraps usage to the terminal width: fix it, so the page is stable
    parser = build_parser()
    out = ["# Command line", "",
           "`clustergym` (also `python -m clustergym`). Generated from the argparse parser "
           "(`clustergym.cli.build_parser`). Errors are one line on stderr with exit code 2; "
           "`--debug` (before or after the subcommand) shows the traceback.", "",
           "```text", parser.format_usage().strip(), "```", ""]
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {c.dest: c.help for c in sub._choices_actions}
    for cmd, p in sub.choices.items():
        out += [f"## clustergym {cmd}", "", helps.get(cmd, "") or "", "",
                "```text", textwrap.dedent(p.format_usage()).strip(), "```", "",
                "| argument | default | help |", "|---|---|---|"]
        for a in p._actions:
            if isinstance(a, argparse._HelpAction):
                continue
            flag = ", ".join(a.option_strings) or a.dest
            if a.choices:
                flag += " {" + ",".join(map(str, a.choices)) + "}"
            if a.required and a.option_strings:
                default = "required"
            elif not a.option_strings:
                default = "positional"
            elif a.default is argparse.SUPPRESS or a.default is None or a.default == []:
                default = ""
            else:
                default = f"`{a.default}`"
            out.append(f"| `{_md_escape(flag)}` | {default} | {_md_escape(a.help or '')} |")
        out.append("")
    out += OUTPUT_FOLDERS.strip("\n").splitlines() + [""]
    return "\n".join(out)


OUTPUT_FOLDERS = """
## Output folders: nothing lost

`run`, `train`, `reproduce` and `import-model` write a folder (`--out`) the same way (`clustergym/outdir.py`);
`drl` keeps its cells in its folder and follows the same rules (docs/drl.md):

1. **Everything is checked before the disk is touched**: arguments, agents, env kwargs and the folder
   itself: it must resolve (a symlink loop, a broken link or a file on the way is one line), every
   name must fit the file system (`NAME_MAX`, usually 255 bytes, and `PATH_MAX`), it must be writable,
   and the free space and the file-size limit (`ulimit -f`) must hold the estimated output.
2. **A folder holding an earlier run is refused** unless `--overwrite` is given. `--overwrite` removes
   exactly what the earlier command listed in `.clustergym-files.json`; that manifest is validated
   first (`{"files": [plain names directly inside --out]}`; anything else is one line, nothing deleted).
3. **One writer per folder**: the command holds `--out/.clustergym.lock` (the `filelock` package) from
   start to end; a second `run`, `train`, `reproduce` or `drl` on the same folder gets one line naming
   the holder (pid, host, command) and exit code 2.
4. **Write beside, then swap**: the new files are written into a staging folder inside `--out` and
   renamed into place only when the command has finished, so an error, Ctrl-C, SIGTERM, `kill -9` or a
   full disk at any point leaves the earlier run byte-identical (leftover staging folders of a killed
   command are removed by the next one).

**Ctrl-C** (or SIGTERM) is one line and exit code 130, also when it lands inside compiled code (ESDP's
numba kernels, torch during `train`): `run` says how many runs had finished (none is written), `train`
that the earlier run in `--out` is intact. The progress bar's ETA is weighted by each agent's measured
seconds per slot (runs go round-robin over the agents, so each is measured early; results come in the
order asked), so a sweep with ESDP beside cheap baselines no longer swings between minutes and an hour.
`clustergym --version` prints the installed version.

Worker processes (`--workers N`) die with the command, even when it is killed with `kill -9` (Linux
parent-death signal; elsewhere a watchdog on the parent's pid). A worker that dies (killed, out of
memory) costs its run, not the sweep: finished runs are kept, the unfinished ones run again in new
workers (one line on stderr says so); a run whose worker dies a second time is one line naming it.

Limits stated up front: at most 100,000 `--seeds`, `--instances` and instances x seeds per command
(and per call of the Python API: `evaluate(..., instances=range(0, 10**15))` is one error at once);
every real scenario parameter lies in [-1e9, 1e9] (a lower bound open at 0 means >= 1e-9), so no
accepted configuration gives NaN or infinite rewards; size parameters are checked against the memory
available (and P1's knapsack grid against a work limit) before anything is allocated. `results.json`
is strict JSON: a value that is not finite is written as `null` and listed under `non_finite`. A plugin
(`CLUSTERGYM_PLUGINS`, entry points) that fails or whose import does not return within
`CLUSTERGYM_PLUGIN_TIMEOUT` seconds (default 30) is one line naming it; `import clustergym` still works.
"""


# ----------------------------------------------------------------------------------------------
def pages() -> dict[str, str]:
    """Relative path under docs/ -> content of every generated page."""
    _quiet()
    import clustergym  # noqa: F401  (registers the ids)
    from clustergym.agent import list_agents
    from clustergym.envs import ENV_IDS

    out = {"envs/index.md": envs_index(ENV_IDS)}
    for i in ENV_IDS:
        out[f"envs/{_short(i)}.md"] = env_page(i)
    names = list_agents()
    out["agents/index.md"] = agents_index(names)
    for n in names:
        out[f"agents/{n}.md"] = agent_page(n).rstrip("\n") + "\n"
    out["cli.md"] = cli_page().rstrip("\n") + "\n"
    return {k: v.rstrip("\n") + "\n" for k, v in out.items()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="only check that the pages are up to date")
    args = ap.parse_args(argv)
    stale = []
    for rel, text in pages().items():
        path = os.path.join(DOCS, rel)
        old = open(path, encoding="utf-8").read() if os.path.exists(path) else None
        if old != text:
            stale.append(rel)
            if not args.check:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w", encoding="utf-8") as f:
                    f.write(text)
    if args.check:
        if stale:
            print("out of date (run python docs/gen_pages.py): " + ", ".join(stale))
            return 1
        return 0
    print(f"wrote {len(stale)} page(s)" + (": " + ", ".join(stale) if stale else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
