"""MkDocs hooks for the clustergym site (mkdocs.yml ``hooks:``).

* ``on_config``: nav entries written as a glob (``agents/*.md``) expand to the pages that exist,
  index first, so a new generated page joins the nav without editing mkdocs.yml; an entry for an
  optional page (``OPTIONAL``) that does not exist yet is dropped instead of failing the strict build.
* On import, the module lays out ``build/docs-src/clustergym``: symlinks that put ``envs/``,
  ``agents/`` and ``baselines/`` where the import package has them (``clustergym.envs`` ...), as the
  setuptools ``package-dir`` mapping does for an install. mkdocstrings (``paths:`` in mkdocs.yml)
  reads the docstrings from that tree by static analysis, without importing anything.
* ``on_page_markdown``: the hand-written pages link files of the repository outside ``docs/``
  (``../README.md``, ``../examples/my_agent.py``) so that they work when browsed in the repository.
  The site has no copy of those files, so such a link, when its target exists in the repository,
  becomes the path in code style. A link to an ``OPTIONAL`` page that does not exist yet becomes its
  text. Any other link whose target exists nowhere is left alone, and the strict build fails on it
  as it should.
"""

from __future__ import annotations

import glob
import os
import re

OPTIONAL = {"esdp.md"}  # pages another branch adds; the nav lists them, a missing one is skipped

_LINK = re.compile(r"(?<!!)\[([^\]\n]+)\]\(([^)\s#]+)(#[^)\s]*)?\)")


def _expand(entry, docs_dir):
    if isinstance(entry, str):
        if any(c in entry for c in "*?["):
            files = sorted(os.path.relpath(p, docs_dir).replace(os.sep, "/")
                           for p in glob.glob(os.path.join(docs_dir, entry)))
            files.sort(key=lambda f: (not f.endswith("index.md"), f))
            return files
        if entry in OPTIONAL and not os.path.exists(os.path.join(docs_dir, entry)):
            return []
        return [entry]
    if isinstance(entry, dict):
        out = {}
        for title, val in entry.items():
            sub = _expand(val, docs_dir)
            if isinstance(val, str):
                if len(sub) == 1 and sub[0] == val:
                    out[title] = val
                elif sub:
                    out[title] = sub
            elif sub:
                out[title] = sub
        return [out] if out else []
    if isinstance(entry, list):
        res = []
        for e in entry:
            res.extend(_expand(e, docs_dir))
        return res
    return [entry]


WINGS = {"envs": "envs", "agents": "agents", "baselines": "baselines"}  # pyproject package-dir


def source_tree(repo: str) -> str:
    """``build/docs-src`` with ``clustergym/`` laid out as installed; returns its path."""
    root = os.path.join(repo, "build", "docs-src")
    pkg = os.path.join(root, "clustergym")
    os.makedirs(pkg, exist_ok=True)
    want = {name: os.path.join(repo, "clustergym", name) for name in os.listdir(os.path.join(repo, "clustergym"))
            if name != "__pycache__"}
    want.update({sub: os.path.join(repo, d) for sub, d in WINGS.items()})
    for name in os.listdir(pkg):
        link = os.path.join(pkg, name)
        if name not in want or not os.path.islink(link) or os.readlink(link) != want[name]:
            os.remove(link) if os.path.islink(link) or os.path.isfile(link) else None
    for name, target in want.items():
        link = os.path.join(pkg, name)
        if not os.path.lexists(link):
            os.symlink(target, link)
    return root


# At import (MkDocs loads hooks while it validates mkdocs.yml), so the tree exists before
# mkdocstrings sets up its search paths in its own ``on_config``, which runs before ours.
source_tree(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def on_config(config, **kwargs):
    if config.nav:
        config.nav = _expand(config.nav, config.docs_dir)
    return config


def on_page_markdown(markdown, page, config, files, **kwargs):
    docs_dir = os.path.abspath(config.docs_dir)
    repo = os.path.dirname(docs_dir)
    here = os.path.dirname(os.path.join(docs_dir, page.file.src_path))

    def repl(m):
        text, target, anchor = m.group(1), m.group(2), m.group(3) or ""
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            return m.group(0)
        path = os.path.normpath(os.path.join(here, target))
        if path.startswith(docs_dir + os.sep):
            rel_docs = os.path.relpath(path, docs_dir).replace(os.sep, "/")
            if rel_docs in OPTIONAL and not os.path.exists(path):
                return text  # an optional page not written yet: plain text, no broken link
            return m.group(0)
        if not path.startswith(repo + os.sep):
            return m.group(0)
        if not os.path.exists(path):
            return m.group(0)  # broken: keep it, the strict build reports it
        rel = os.path.relpath(path, repo).replace(os.sep, "/")
        return text if text.strip("`") == rel else f"{text} (`{rel}`)"

    return _LINK.sub(repl, markdown)
