"""The front page (README.md) stays a landing page: short, with the sections a first-time reader needs; its
timing lines read from docs/data/timings.json; every result row it shows also on a docs page (the pages
hold the evidence); every link it makes pointing at a file that exists; the test command CI runs is the
one it gives."""

import ast
import json
import re

from tests.helpers import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")
TIMINGS = json.loads((ROOT / "docs" / "data" / "timings.json").read_text(encoding="utf-8"))
MAX_LINES = 300


def timing_line(cmd: str, entry: dict) -> str:
    """The sentence README gives for one command's measured time."""
    return f"`{cmd}` took {entry['took']} on {entry['date']} ({entry['load']}; {entry['note']})."


def tables(text: str) -> list[list[str]]:
    """The Markdown tables of ``text``, each as its lines (header, separator, rows)."""
    out, cur = [], []
    for line in text.splitlines() + [""]:
        if line.startswith("|"):
            cur.append(line)
        elif cur:
            out.append(cur)
            cur = []
    return out


def result_rows(text: str) -> list[str]:
    """The body rows of the result tables of ``text``: tables with a verdict column or a 95% interval column."""
    rows = []
    for t in tables(text):
        if "verdict" in t[0] or "95%" in t[0]:
            rows += t[2:]
    return rows


def test_readme_is_short_with_the_landing_sections():
    n = len(README.splitlines())
    assert n <= MAX_LINES, f"README.md has {n} lines (at most {MAX_LINES}): move the detail to a docs page"
    heads = re.findall(r"^## (.+)$", README, re.M)
    for want in ("Two commands", "Quick start", "headline claims", "Learned schedulers", "Layout", "Links"):
        assert any(want in h for h in heads), (want, heads)
    assert "docs/figures/gallery/" in README  # a picture from the gallery


def test_every_command_has_one_measured_time_from_the_timings_file():
    assert set(TIMINGS) == {"make test", "make reproduce"}
    for cmd, entry in TIMINGS.items():
        assert all(entry.get(k) for k in ("took", "date", "load", "note")), (cmd, entry)
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", entry["date"]), entry["date"]
        assert README.count(timing_line(cmd, entry)) == 1, f"README's time of {cmd} is not docs/data/timings.json's"
    # no other duration in README: the measured times live in the timings file and on docs/performance.md
    rest = README
    for cmd, entry in TIMINGS.items():
        rest = rest.replace(timing_line(cmd, entry), "")
    assert not re.findall(r"\b\d+ min\b|\b\d+ min \d+ s\b|\bwall time\b|CPU-hours", rest), \
        "README.md states a duration outside its timing lines"


def test_no_stale_statements_about_quick_mode():
    for phrase in ("same verdicts", "same headline verdicts", "newer evidence", "five-instance", "5 instances (0–4)"):
        assert phrase not in README, phrase


def test_every_result_row_of_the_readme_is_on_a_docs_page():
    rows = result_rows(README)
    assert len(rows) >= 4 * 3 + 4, f"expected the four papers' tables and the learned-scheduler table, got {rows}"
    pages = {p.name: p.read_text(encoding="utf-8") for p in (ROOT / "docs").glob("*.md")}
    missing = [r[:100] for r in rows if not any(r in text for text in pages.values())]
    assert not missing, "result rows in README.md that no docs page shows (copy the page's row):\n" + "\n".join(missing)


def test_result_rows_are_checked_against_the_pages():
    """The check above fails on a row a page does not have (one changed digit)."""
    row = result_rows(README)[0]
    changed = re.sub(r"\d", lambda m: str((int(m[0]) + 1) % 10), row, count=1)
    pages = [p.read_text(encoding="utf-8") for p in (ROOT / "docs").glob("*.md")]
    assert any(row in t for t in pages) and not any(changed in t for t in pages)


def test_every_link_and_image_of_the_readme_exists():
    links = re.findall(r"\]\(([^)\s]+)\)", README)
    assert len(links) > 20
    broken = []
    for link in links:
        if re.match(r"[a-z]+://", link) or link.startswith("#"):
            continue
        path = link.split("#")[0]
        if not (ROOT / path).exists():
            broken.append(link)
    assert not broken, f"README.md links to files that do not exist: {broken}"


def test_ci_runs_the_test_command_the_readme_gives():
    block = re.search(r"## Two commands.*?```bash\n(.*?)```", README, re.S)[1]
    commands = [line.split("#")[0].strip() for line in block.splitlines()]
    assert commands == ["make reproduce", "make test"]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert [ln for ln in ci.splitlines() if ln and not ln.startswith("#")][-1] == "make test"
    make = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert re.search(r"^test:", make, re.M) and re.search(r"^reproduce:", make, re.M)


def test_the_setup_paragraph_lists_the_extras_make_installs():
    make = (ROOT / "Makefile").read_text(encoding="utf-8")
    extras = re.search(r'-e "\.\[([a-z,]+)\]"', make)[1]
    assert f"`{extras}`" in README, f"README's set-up paragraph does not list the Makefile's extras {extras}"


def test_the_quick_start_imports_what_exists():
    code = re.search(r"## Quick start\s+```python\n(.*?)```", README, re.S)[1]
    tree = ast.parse(code)
    imports = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert len(code.strip().splitlines()) <= 10 and imports
    exec(compile(ast.Module(body=imports, type_ignores=[]), "README quick start", "exec"), {})


def test_the_stated_length_of_the_example_agent_is_its_length():
    n = len((ROOT / "examples" / "my_agent.py").read_text(encoding="utf-8").splitlines())
    stated = []
    for path in [ROOT / "README.md", ROOT / "examples" / "my_agent.py", *sorted((ROOT / "docs").glob("*.md"))]:
        text = path.read_text(encoding="utf-8")
        windows = [text[:300]] if path.name == "my_agent.py" else [text[m.end():m.end() + 120]
                                                                   for m in re.finditer(r"my_agent\.py", text)]
        stated += [(path.name, int(k)) for w in windows for k in re.findall(r"\b(\d+)(?:-line| lines)\b", w)]
    assert stated, "no page states the example agent's length"
    assert all(k == n for _, k in stated), f"examples/my_agent.py has {n} lines; stated: {stated}"
