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
* one page per registered agent name (``clustergym.core.agent.list_agents()``, one section per family
  when a name has several implementations): its equations (``EQUATIONS`` in ``docs/agent_equations.py``, with the
  paper's equation numbers), its options (``__init__`` signature, following ``**kwargs`` into the
  base classes the way ``make`` does), and its docstrings;
* the command-line reference from the argparse parser (``clustergym.cli.main.build_parser``).

``tests/project/test_docs.py`` runs ``--check``, so a page that drifts from the code fails the test suite.
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import os
import sys
import warnings

import numpy as np

DOCS = os.path.dirname(os.path.abspath(__file__))


def _sibling(name: str):
    """The module ``docs/<name>.py`` (loaded by path: this script is not in a package)."""
    spec = importlib.util.spec_from_file_location(f"clustergym_docs_{name}", os.path.join(DOCS, f"{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


EQUATIONS = _sibling("agent_equations").EQUATIONS  # each agent's equations, with the paper's numbers


def _paper_page(family: str) -> tuple[str, str, str]:
    """(paper, paper page, experiment) of a family, from its FamilySpec (the pages are written by hand)."""
    from clustergym.core.family import FAMILIES

    f = FAMILIES.get(family)
    return ("", "", "") if f is None else (f.paper, f.paper_file or "", f.experiment or "")


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
    """The page of one env id: registration, spaces, info keys, metrics, arguments and scenario model."""
    import gymnasium as gym

    spec = gym.spec(env_id)
    cls = _load(spec.entry_point)
    defaults, scen_names, smod = _scenario_defaults(cls)
    sig = inspect.signature(cls.__init__)
    # The summary opens the class docstring rendered under "Specification": not repeated here.
    out = [f"# {_short(env_id)}", ""] + _env_table(env_id, spec, cls)
    out += ["## Specification", "",
            "The class docstring, which is the env's spec (Gymnasium's sections). The sections after it "
            "are measured on the code.", "",
            f"::: {cls.__module__}.{cls.__qualname__}", "    options:", "      heading_level: 2", ""]
    out += _spaces_section(env_id, cls, sig) + _info_section(env_id) + _metrics_section(cls)
    out += _arguments_section(cls, sig, defaults, scen_names, smod)
    if smod:
        out += ["## Scenario model", "", f"The docstring of `{smod}`: how the `paper` scenario is drawn, "
                "and the choices where the paper is ambiguous.", "", f"::: {smod}", "    options:",
                "      heading_level: 2", ""]
    return "\n".join(out)


def _env_table(env_id: str, spec, cls) -> list[str]:
    """The table of facts at the top of an env page."""
    import gymnasium as gym

    from clustergym.core.agent import list_agents
    from clustergym.envs.multiagent import PARALLEL_ENVS

    fam = cls.family
    paper, paper_md, _ = _paper_page(fam)
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
    env.close()
    return ["| | |", "|---|---|"] + [f"| {k} | {_md_escape(v)} |" for k, v in rows] + [""]


def _spaces_section(env_id: str, cls, sig) -> list[str]:
    """The action space (per action mode) and observation space of an env built with the defaults."""
    import gymnasium as gym

    out = ["## Spaces at the default arguments", "",
           "Measured on `gym.make(\"%s\")`; the sizes follow the instance (|E|, |L|, numbers of servers, "
           "machines, visible jobs), so other arguments give other shapes." % env_id, ""]
    env = gym.make(env_id)
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
    return out


def _info_section(env_id: str) -> list[str]:
    """The ``info`` keys seen in a short seeded rollout."""
    out = ["## Info keys", "",
           "Observed in a seeded 4-slot rollout with random actions at the default arguments "
           "(first slot; `episode_*` keys appear at the last slot). Agents get `info` without "
           "`metrics` (`clustergym.core.agent.public_info`); the runner reads `metrics` for evaluation "
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
    return out + [""]


def _metrics_section(cls) -> list[str]:
    """The metrics the env declares (``metrics_spec``) and how results.json reports them."""
    from clustergym.core.metrics import reported_as

    out = ["## Metrics (declared)", "",
           "The keys `step` may put in `info[\"metrics\"]`, as the class attribute `metrics_spec` declares them "
           "(`clustergym/core/metrics.py`): *slot* = a value of that slot, *cumulative* = a running total since "
           "`reset`, *episode* = present at the last slot only. The runner aggregates each key by its kind "
           "([results.json schema](../results-schema.md)).", "",
           "| key | kind | meaning | in results.json `runs[]` |", "|---|---|---|---|"]
    return out + [f"| `{k}` | {m.kind}{'' if m.shape == '()' else ' ' + m.shape} | {_md_escape(m.doc)} | "
                  f"{reported_as(k, m)} |" for k, m in cls.metrics_spec.items()] + [""]


def _arguments_section(cls, sig, defaults: dict, scen_names, smod: str) -> list[str]:
    """Every keyword argument of ``gym.make`` with its default and the valid values the env's check states."""
    out = ["## Arguments: defaults and valid values", "",
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
    out += [f"| `{k}` | {_md_escape(_fmt_default(v))} | {_md_escape(_probe(cls, k))} |"
            for k, v in defaults.items() if k not in seen] + [""]
    if scen_names:
        out += ["Scenario names (`scenario=`): " + ", ".join(f"`{n}`" for n in scen_names)
                + ". The parameters above belong to `paper`; other named scenarios take their own "
                  "(the docstring and the paper page say which).", ""]
    return out


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

    from clustergym.core.agent import _option_params
    from clustergym.core.family import agent_entry_points
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
    out += ["", "Use it by name: `clustergym.core.agent.make(\"%s\", env_id=\"%s\")`, "
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
    from clustergym.core.family import agent_entry_points

    out = ["# Agents", "",
           "Every agent name registered with `clustergym.register_agent` "
           "(`clustergym.list_agents()`), with the problem families it can act in. A name may "
           "have one implementation per family (`drf`, `random`). Your own agents: "
           "[Adding an agent](../extending.md).", "", "| agent | families |", "|---|---|"]
    for n in names:
        out.append(f"| [`{n}`]({n}.md) | {', '.join(f'`{f}`' for f in agent_entry_points(n))} |")
    return "\n".join(out) + "\n"


# ----------------------------------------------------------------------------------------------
def pages() -> dict[str, str]:
    """Relative path under docs/ -> content of every generated page."""
    _quiet()
    import clustergym  # noqa: F401  (registers the ids)
    from clustergym.core.agent import list_agents
    from clustergym.envs import ENV_IDS

    out = {"envs/index.md": envs_index(ENV_IDS)}
    for i in ENV_IDS:
        out[f"envs/{_short(i)}.md"] = env_page(i)
    names = list_agents()
    out["agents/index.md"] = agents_index(names)
    for n in names:
        out[f"agents/{n}.md"] = agent_page(n).rstrip("\n") + "\n"
    out["cli.md"] = _sibling("cli_page").cli_page().rstrip("\n") + "\n"
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
