"""Contract tests over the registries: every env id of every registered family and every
registered agent, with ``clustergym.runner.testing`` on each env's small ``check_kwargs`` instance. A new env or
agent is tested here without editing this file."""

from __future__ import annotations

import pytest
from gymnasium.envs.registration import load_env_creator

import clustergym
from clustergym.runner import testing
from clustergym.core.agent import list_agents
from clustergym.core.family import env_entry

ENVS = [(f, e) for f in clustergym.family_specs() for e in f.envs]
PAIRS = [(e.id, name) for _, e in ENVS for name in list_agents(e.id)]
# (id, kwargs) of every action mode besides the default one (the env class's ``action_modes``)
MODES = [(e.id, {"action_mode": m}) for _, e in ENVS
         for m in getattr(load_env_creator(e.entry_point), "action_modes", ())[1:]]
MODE_IDS = [f"{i.split('/')[-1]}-{kw['action_mode']}" for i, kw in MODES]


def small(env_id: str) -> dict:
    return {**env_entry(env_id)[1].check_kwargs, "oracle": False}


def test_every_family_has_envs_a_random_agent_and_its_paper_agent():
    assert [f.name for f in clustergym.family_specs()][:4] == ["multiserver-channel", "multiserver-allocation",
                                                             "ringallreduce", "approxjobs"]
    for f, e in ENVS:
        agents = list_agents(e.id)
        assert "random" in agents, e.id
        assert f.paper_agent is None or f.paper_agent in agents, e.id


@pytest.mark.parametrize("env_id", [e.id for _, e in ENVS])
def test_invalid_actions_raise_and_change_nothing(env_id):
    testing.check_invalid_actions(env_id, small(env_id))


@pytest.mark.parametrize("env_id,kw", MODES, ids=MODE_IDS)
def test_invalid_actions_raise_and_change_nothing_in_every_action_mode(env_id, kw):
    testing.check_invalid_actions(env_id, {**small(env_id), **kw})
    testing.check_info_keys(env_id, {k: v for k, v in {**small(env_id), **kw}.items() if k != "oracle"})


@pytest.mark.parametrize("env_id", [e.id for _, e in ENVS])
def test_step_info_has_feedback_and_metrics(env_id):
    testing.check_info_keys(env_id, {k: v for k, v in small(env_id).items() if k != "oracle"})


@pytest.mark.parametrize("env_id,agent", PAIRS, ids=[f"{i.split('/')[-1]}-{a}" for i, a in PAIRS])
def test_agent_contract(env_id, agent):
    """Feasible under infeasible="raise", never reads info["metrics"], same seed -> same actions."""
    testing.check_agent(agent, env_id, small(env_id), steps=60)


@pytest.mark.parametrize("spec", clustergym.family_specs(), ids=lambda f: f.name)
def test_family_spec_references_resolve(spec):
    """Every lazy "module:attr" of a FamilySpec imports, and names what it says it names."""
    import importlib

    from clustergym.core.scenario import Scenario
    from clustergym.experiments import list_papers

    def load(ep):
        mod, _, attr = ep.partition(":")
        return getattr(importlib.import_module(mod), attr)

    assert isinstance(spec.scenario_factory()("paper", 0), Scenario)
    for e in spec.envs:
        assert load(e.entry_point).family == spec.name, e.id
        if e.vector_entry_point:
            assert load(e.vector_entry_point).family == spec.name, e.id
        if e.parallel_entry_point:
            assert callable(load(e.parallel_entry_point)), e.id
    if spec.drl_hooks:
        hooks = spec.hooks()
        assert any(hasattr(hooks, h) for h in ("Stats", "sb3_mask", "box_bounds", "compact_keys", "compact_columns")), \
            spec.drl_hooks
    if spec.entity:  # the per-entity network's hooks (torch)
        ent = spec.entity_hooks()
        assert callable(ent.layout) and callable(ent.features) and isinstance(ent.BUFFERS, dict), spec.entity
    if spec.experiment:
        assert spec.experiment in list_papers(), spec.experiment
