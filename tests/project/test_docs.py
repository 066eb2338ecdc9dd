"""The docs site: a page per registered env id and per agent name, pages
generated from the code and up to date, and ``mkdocs build --strict`` passing (broken links and
unresolved mkdocstrings references fail it)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest
from tests.helpers import ROOT as REPO_ROOT

ROOT = str(REPO_ROOT)
DOCS = os.path.join(ROOT, "docs")


def _module(name: str, path: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _registered():
    """Env ids and agent names that clustergym itself registers, read in a fresh interpreter: other
    test modules register agents of their own (e.g. a spy) in this process's registry."""
    code = ("import json, clustergym; from clustergym.core.agent import list_agents; "
            "from clustergym.envs import ENV_IDS; print(json.dumps([list(ENV_IDS), list_agents()]))")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    env_ids, agents = json.loads(r.stdout.strip().splitlines()[-1])
    assert len(env_ids) >= 4 and "esdp" in agents
    return env_ids, agents


def test_every_registered_env_and_agent_has_a_page():
    env_ids, agents = _registered()
    missing = [f"envs/{i.split('/', 1)[1]}.md" for i in env_ids]
    missing += [f"agents/{a}.md" for a in agents]
    missing = [p for p in missing if not os.path.isfile(os.path.join(DOCS, p))]
    assert not missing, f"registered but without a docs page: {missing} (run python docs/gen_pages.py)"


def test_generated_pages_are_up_to_date():
    r = subprocess.run([sys.executable, os.path.join(DOCS, "gen_pages.py"), "--check"], cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr


def test_a_newly_registered_agent_gets_a_page_and_the_check_fails_until_written(monkeypatch):
    """The generator follows the registry: a new agent name is a new page, so ``--check`` (and the
    test above) fails until the page is written."""
    from clustergym.core import agent as agent_mod
    from clustergym.core import family as family_mod

    gen = _module("gen_pages_under_test", os.path.join(DOCS, "gen_pages.py"))
    agent_mod._load_builtins()
    # the agent registry's data lives in clustergym.core.family; the probe entry is removed afterwards
    monkeypatch.setitem(family_mod._AGENTS, "zz-docs-probe", {"multiserver-channel": "clustergym.baselines.multiserver_channel:HAUF"})
    pages = gen.pages()
    assert "agents/zz-docs-probe.md" in pages
    assert "[`zz-docs-probe`](zz-docs-probe.md)" in pages["agents/index.md"]
    assert "| `skip_unfit` |" in pages["agents/zz-docs-probe.md"]  # options read from __init__
    assert not os.path.exists(os.path.join(DOCS, "agents", "zz-docs-probe.md"))


def test_env_pages_state_the_spaces_and_ranges_of_the_code():
    """Spot checks that the generated facts are the code's: P1's action space at the defaults and a
    valid range quoted from the env's own ValueError."""
    import gymnasium as gym

    import clustergym  # noqa: F401

    env = gym.make("clustergym/MultiServerChannel-v0")
    text = open(os.path.join(DOCS, "envs", "MultiServerChannel-v0.md"), encoding="utf-8").read()
    assert f"`{env.action_space}`" in text
    with pytest.raises(ValueError) as e:
        gym.make("clustergym/MultiServerChannel-v0", rho=2.0)
    expected = str(e.value).split("expected ", 1)[1]  # "a number in [0, 1]"
    assert f"| `rho` | `0.9` | {expected} |" in text


def test_hook_keeps_broken_links_and_rewrites_links_to_repository_files():
    hooks = _module("docs_hooks_under_test", os.path.join(DOCS, "hooks.py"))

    class _F:
        src_path = "extending.md"

    class _P:
        file = _F()

    class _C:
        docs_dir = DOCS

    md = "[ok](../examples/my_agent.py) [site](envs/index.md) [bad](../no/such_file.py) [web](https://x.org/a.md)"
    out = hooks.on_page_markdown(md, _P(), _C(), None)
    assert "ok (`examples/my_agent.py`)" in out  # exists in the repo, not in the site: plain path
    assert "[site](envs/index.md)" in out and "[web](https://x.org/a.md)" in out
    assert "[bad](../no/such_file.py)" in out  # broken: left for the strict build to report
    for page in hooks.OPTIONAL:  # an optional page: a link while it exists, its text before
        md = f"[the page]({page})"
        want = md if os.path.exists(os.path.join(DOCS, page)) else "the page"
        assert hooks.on_page_markdown(md, _P(), _C(), None) == want
    nav = hooks._expand([{"Papers": ["esdp.md", "opm.md"]}, {"Agents": "agents/*.md"}], DOCS)
    agents = nav[1]["Agents"]
    assert agents[0] == "agents/index.md" and "agents/esdp.md" in agents
    if not os.path.exists(os.path.join(DOCS, "esdp.md")):
        assert nav[0]["Papers"] == ["opm.md"]  # optional page not written yet: dropped, no warning


def test_hook_shows_links_to_docs_files_left_out_of_the_site_as_repository_paths():
    """docs/data/ is excluded from the site (mkdocs.yml exclude_docs): a link to a report there would be a 404 in the
    site, so it is shown as the file's repository path; a page of the site stays a link."""
    from mkdocs.structure.files import File, Files, InclusionLevel

    hooks = _module("docs_hooks_excluded", os.path.join(DOCS, "hooks.py"))

    class _P:
        file = File("opm.md", DOCS, "/tmp/site", False)

    class _C:
        docs_dir = DOCS

    files = Files([File("opm.md", DOCS, "/tmp/site", False), File("evaluation.md", DOCS, "/tmp/site", False),
                   File("data/full/opm-report.md", DOCS, "/tmp/site", False, inclusion=InclusionLevel.EXCLUDED)])
    md = "[data/full/opm-report.md](data/full/opm-report.md) and [scores](evaluation.md#normalised-score)"
    out = hooks.on_page_markdown(md, _P(), _C(), files)
    assert out == "data/full/opm-report.md (`docs/data/full/opm-report.md`) and [scores](evaluation.md#normalised-score)"


def test_site_builds_in_strict_mode(built_site):
    """``mkdocs build --strict`` (what ``make docs`` runs): no warning at all, every page present."""
    assert importlib.util.find_spec("mkdocs") and importlib.util.find_spec("mkdocstrings_handlers"), \
        "the docs extra is not installed: pip install -e '.[docs]' (make setup does)"
    env_ids, agents = _registered()
    site, r, wall = built_site.path, built_site, built_site.wall_s
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "WARNING" not in r.stderr, r.stderr[-3000:]
    for i in env_ids:
        page = site / "envs" / f"{i.split('/', 1)[1]}.html"
        html = page.read_text(encoding="utf-8")
        assert "Version History" in html and "Observation Space" in html, page  # docstring rendered
    for a in agents:
        assert (site / "agents" / f"{a}.html").is_file(), a
    assert (site / "cli.html").is_file() and (site / "results-schema.html").is_file()
    assert wall < 120, f"docs build took {wall:.0f} s"


def test_maths_pipes_in_table_rows_do_not_split_cells():
    """A docstring's ``|E|`` inside a table row (P1's observation table) is escaped before the tables
    extension splits the row; cell borders and text outside tables are left alone."""
    hooks = _module("hooks_under_test", os.path.join(DOCS, "hooks.py"))
    row = "| edge_present | MultiBinary(P) | padded only: 1 for the instance's channels e < |E|    |"
    assert hooks.escape_math_pipes(row) == row.replace("|E|", "\\|E\\|")
    assert hooks.escape_math_pipes("| t | Box(0, T) | |x| and |L| |") == "| t | Box(0, T) | \\|x\\| and \\|L\\| |"
    for text in ("| a | b |", "|---|---|", "not a row: |E| stays"):
        assert hooks.escape_math_pipes(text) == text
    import markdown

    ext = hooks._table_math_pipes()
    html = markdown.markdown("| key | meaning |\n|---|---|\n| e | channel e < |E| |", extensions=["tables", ext])
    assert html.count("<td>") == 2 and "|E|" in html


def test_the_cli_page_lists_no_hidden_option():
    """Options hidden from ``--help`` (e.g. reproduce's test-only ``--tiny``) are not listed in docs/cli.md."""
    gen = _module("gen_pages_under_test_cli", os.path.join(DOCS, "gen_pages.py"))
    page = gen.pages()["cli.md"]
    assert "SUPPRESS" not in page
    section = page.split("## clustergym reproduce", 1)[1].split("## clustergym ", 1)[0]
    assert "| `--only` |" in section and "| `--tiny` |" not in section
