"""MkDocs hooks for the clustergym site (mkdocs.yml ``hooks:``).

* ``on_config``: nav entries written as a glob (``agents/*.md``) expand to the pages that exist,
  index first, so a new generated page joins the nav without editing mkdocs.yml; an entry for an
  optional page (``OPTIONAL``) that does not exist yet is dropped instead of failing the strict build.
* On import, the module lays out ``build/docs-src/clustergym``: symlinks that put ``envs/``,
  ``agents/`` and ``baselines/`` where the import package has them (``clustergym.envs`` ...), as the
  setuptools ``package-dir`` mapping does for an install. mkdocstrings (``paths:`` in mkdocs.yml)
  reads the docstrings from that tree by static analysis, without importing anything.
* ``on_config`` also adds :class:`TableMathPipes` to the Markdown extensions (the pages' and the docstrings'
  that mkdocstrings renders): in a table row, ``|E|`` (a cardinality or absolute value written in a
  docstring) would split the cell in two; it becomes ``\\|E\\|``, shown as |E|.
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


try:
    from mkdocs.plugins import event_priority as _priority
except ImportError:  # pragma: no cover - MkDocs < 1.4
    def _priority(_):
        return lambda f: f


_MATH_PIPES = re.compile(r"(?<=[\s(<>=≤≥,+\-*/·])\|([A-Za-z][A-Za-z_0-9]{0,3}(?:\([a-z]\))?)\|(?=[\s),.;:<>=≤≥+\-*/·]|$)")


def escape_math_pipes(line: str) -> str:
    """A table row with ``|E|``-style maths inside its cells: those pipes escaped (cell borders untouched).
    Only rows (lines starting with ``|``); a cell border has a space or the line's end beside it."""
    if not line.lstrip().startswith("|"):
        return line
    return _MATH_PIPES.sub(lambda m: f"\\|{m.group(1)}\\|", line)


def _table_math_pipes():
    from markdown.extensions import Extension
    from markdown.preprocessors import Preprocessor

    class _Pre(Preprocessor):
        def run(self, lines):
            return [escape_math_pipes(ln) for ln in lines]

    class TableMathPipes(Extension):
        """Escape ``|E|``-style maths in table rows before the tables extension splits the cells."""

        def extendMarkdown(self, md):
            md.preprocessors.register(_Pre(md), "table_math_pipes", 29)  # before "tables" (a block parser)

    return TableMathPipes()


@_priority(100)  # before mkdocstrings' on_config, which hands the extensions to its renderer
def on_config(config, **kwargs):
    if config.nav:
        config.nav = _expand(config.nav, config.docs_dir)
    config.markdown_extensions.append(_table_math_pipes())
    return config


def _in_site(files, rel_docs: str) -> bool:
    """Whether the docs file ``rel_docs`` is part of the built site (True when mkdocs' file list is not given)."""
    if files is None:
        return True
    f = files.get_file_from_path(rel_docs)
    inclusion = getattr(f, "inclusion", None)
    return f is not None and not (inclusion is not None and inclusion.is_excluded())


def on_page_markdown(markdown, page, config, files, **kwargs):
    docs_dir = os.path.abspath(config.docs_dir)
    repo = os.path.dirname(docs_dir)
    here = os.path.dirname(os.path.join(docs_dir, page.file.src_path))

    def repl(m):
        text, target = m.group(1), m.group(2)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            return m.group(0)
        path = os.path.normpath(os.path.join(here, target))
        if path.startswith(docs_dir + os.sep):
            rel_docs = os.path.relpath(path, docs_dir).replace(os.sep, "/")
            if rel_docs in OPTIONAL and not os.path.exists(path):
                return text  # an optional page not written yet: plain text, no broken link
            if not _in_site(files, rel_docs) and os.path.exists(path):  # under docs/ but excluded (docs/data/)
                rel = os.path.relpath(path, repo).replace(os.sep, "/")
                return f"{text} (`{rel}`)"
            return m.group(0)
        if not path.startswith(repo + os.sep):
            return m.group(0)
        if not os.path.exists(path):
            return m.group(0)  # broken: keep it, the strict build reports it
        rel = os.path.relpath(path, repo).replace(os.sep, "/")
        return text if text.strip("`") == rel else f"{text} (`{rel}`)"

    return _LINK.sub(repl, markdown)
