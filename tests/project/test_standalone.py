"""The project stands on its own: no file in the package, docs, tests, examples or benchmarks points to
a document users do not have (a team-internal specification, an issue number, a list of goals to show).
What a user needs is written in the project's own words, in docs/ (docs/architecture.md for the
contracts, docs/evaluation.md for the evaluation rules)."""

import re

from tests.helpers import ROOT as REPO_ROOT

ROOT = REPO_ROOT
FOLDERS = ("clustergym", "envs", "agents", "baselines", "docs", "tests", "examples", "benchmarks")
FILES = ("README.md",)
TEXT_SUFFIXES = {".py", ".md", ".yml", ".yaml", ".toml", ".txt", ".cfg", ".ini", ".json", ".sh", ".rst"}
# Vendored or generated files that are not ours to word, and folders that are not sources.
SKIP_PARTS = {"__pycache__", "javascripts", "site", ".pytest_cache", ".mypy_cache"}

# Built from pieces so that this file does not match its own pattern.
_TEAM_DOC = r"\b" + "S" + "PEC" + r"\b"
_ISSUE = r"\b[Ii]" + "ssues?" + r"[ -]#?\d+"
_SHOW = "must" + "-?" + "show"
PATTERN = re.compile("|".join((_TEAM_DOC, _ISSUE, _SHOW)))


def _text_files():
    paths = [ROOT / f for f in FILES]
    for folder in FOLDERS:
        base = ROOT / folder
        if base.is_dir():
            paths += sorted(p for p in base.rglob("*") if p.is_file())
    for path in paths:
        rel = path.relative_to(ROOT)
        if path.suffix not in TEXT_SUFFIXES or any(part in SKIP_PARTS or part.startswith(".")
                                                   or part.endswith(".egg-info") for part in rel.parts[:-1]):
            continue
        yield rel, path


def references(text: str) -> list[tuple[int, str]]:
    """(line number, line) of every line that refers to a team document, an issue number or a goal list."""
    return [(n, line.strip()) for n, line in enumerate(text.splitlines(), 1) if PATTERN.search(line)]


def test_pattern_catches_what_it_should():
    bad = ["see " + "S" + "PEC §10", "(" + "issue" + " 25)", "I" + "ssues 12-14", "issue" + " #7",
           "issue" + "-26 run", "must" + "-show 2", "must" + "show"]
    assert all(references(s) for s in bad), bad
    ok = ["FamilySpec", "the spec string", "an issue with the paper", "tis" + "sue 5", "S" + "PECIAL"]
    assert not any(references(s) for s in ok)


def test_no_file_refers_to_team_documents_or_issue_numbers():
    found, checked = [], 0
    for rel, path in _text_files():
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        checked += 1
        found += [f"{rel}:{n}: {line[:120]}" for n, line in references(text)]
    assert checked > 100, f"only {checked} files walked: wrong root {ROOT}?"
    assert not found, ("files refer to documents users do not have (say it in the project's own words, "
                       "or point to docs/):\n" + "\n".join(found))
