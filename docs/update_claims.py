"""Copy the claims tables of a reproduction into the papers' pages.

    make reproduce                                   # clustergym reproduce all --quick --out runs/reproduce
    .venv/bin/python docs/update_claims.py runs/reproduce            # or name papers: ... runs/reproduce opm
    .venv/bin/python docs/update_claims.py --full runs/full          # full mode (clustergym reproduce all)

Every claims table of ``RUN/<paper>/report.md`` (a table whose header starts ``| claim | paper |``,
with the heading above it and the notes under it) replaces the text between the markers
``<!-- quick-claims:<paper> -->`` and ``<!-- /quick-claims:<paper> -->`` (``full-claims`` with ``--full``)
in docs/<paper>.md, so the tables the docs show are the ones the command printed. README.md quotes some of the
full-mode rows; tests/project/test_readme.py fails when a quoted row is no longer on its page. The report
itself is kept as docs/data/<mode>/<paper>-report.md, and each paper page's "quick mode against full mode"
table (between ``<!-- quick-vs-full:<paper> -->`` and ``<!-- /quick-vs-full:<paper> -->``: the claims whose
verdicts differ between the two modes) is regenerated from the quick and full reports kept there; alone with

    .venv/bin/python docs/update_claims.py --compare          # from docs/data only, no run folder
"""

from __future__ import annotations

import collections
import os
import re
import shutil
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAPERS = ("esdp", "ogasched", "gadget", "opm")
PAGE = {"esdp": "docs/esdp.md", "ogasched": "docs/ogasched.md", "gadget": "docs/gadget.md", "opm": "docs/opm.md"}


def claims_blocks(report: str) -> str:
    """The claims tables of one paper's report, each under the last heading before it."""
    lines = report.split("\n")
    out, heading, i = [], "", 0
    title = lines[0].lstrip("# ").strip() if lines else ""
    head = next((ln for ln in lines[1:8] if ln.strip() and not ln.startswith("#")), "")
    while i < len(lines):
        ln = lines[i]
        if ln.startswith("#"):
            heading = ln.lstrip("#").strip()
        if ln.startswith("| claim | paper |"):
            block = []
            while i < len(lines) and lines[i].startswith("|"):
                block.append(lines[i])
                i += 1
            # the notes under the table: the statistic and the verdict rule
            while i < len(lines) and (not lines[i].strip() or lines[i].startswith(("Statistic", "Verdicts"))):
                if lines[i].strip():
                    block += ["", lines[i]]
                i += 1
                if block[-1].startswith("Verdicts"):
                    break
            out += [f"**{heading}**", "", *block, ""]
            continue
        i += 1
    return "\n".join([f"*{title}.* {head}", "", *out]).rstrip() + "\n"


def claim_rows(text: str) -> list[tuple[str, str, str]]:
    """``(table, claim, verdict)`` of every row of every claims table in ``text`` (a report or the claims blocks of
    one): the heading above the table, the claim, the verdict without its bold marks."""
    out, inside, heading = [], False, ""
    for ln in text.split("\n"):
        if ln.startswith("#") or re.fullmatch(r"\*\*[^*]+\*\*", ln.strip()):
            heading = ln.lstrip("#").strip().strip("*")
        if ln.startswith("| claim | paper |"):
            inside = True
            continue
        if not (inside and ln.startswith("|")):
            inside = False
            continue
        if not ln.startswith("|---"):
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", ln)[1:-1]]
            out.append((heading, cells[0], cells[-1].replace("**", "").strip()))
    return out


# The numbers of a claim that depend on the mode (horizons, loads, slots): set aside to pair a quick-mode claim
# with its full-mode one; figure, table, equation and theorem numbers are kept.
_MODE_NUMBER = re.compile(r"(?<!Fig\. )(?<!Figs\. )(?<!Table )(?<!eq\. )(?<!Theorem )(?<![\w.])[+−-]?\d[\d,]*(\.\d+)?")


def _paired(rows: list[tuple[str, str, str]]) -> dict:
    """``{(table, claim, occurrence): (table, claim, verdict)}``, the table's heading and the claim with the mode's
    numbers set aside: the k-th such claim of a table in one mode pairs with the k-th of the same table in the other
    (e.g. the k-th load of a figure)."""
    seen: collections.Counter = collections.Counter()
    out = {}
    for table, claim, verdict in rows:
        key = (_MODE_NUMBER.sub("#", table), _MODE_NUMBER.sub("#", claim))
        seen[key] += 1
        out[key, seen[key]] = (table, claim, verdict)
    return out


def quick_vs_full(quick: str, full: str) -> str:
    """The markdown of the claims whose verdicts differ between a quick-mode and a full-mode report (or their claims
    blocks), with how many claims both judge and how many only one does."""
    q, f = _paired(claim_rows(quick)), _paired(claim_rows(full))
    both = [k for k in f if k in q]
    differ = [k for k in both if q[k][2] != f[k][2]]
    lines = [f"{len(both)} claims are judged in both modes (paired by their text and their table's heading, the numbers "
             f"that depend on the mode — horizons, loads — set aside), {len(f) - len(both)} in full mode only and {len(q) - len(both)} in quick "
             f"mode only; **{len(differ)} of the {len(both)}** get a different verdict" + (":" if differ else "."), ""]
    if differ:
        lines += ["| table (full mode) | claim (full mode's text) | quick mode | full mode |", "|---|---|---|---|"]
        lines += [f"| {f[k][0]} | {f[k][1]} | {q[k][2]} | {f[k][2]} |" for k in differ]
    return "\n".join(lines) + "\n"


def data_path(mode: str, paper: str) -> str:
    """The report of ``paper`` in ``mode`` kept beside the docs."""
    return os.path.join(ROOT, "docs", "data", mode, f"{paper}-report.md")


def compare_block(paper: str) -> str:
    """The page's quick-vs-full table of ``paper``, from the reports kept in docs/data."""
    with open(data_path("quick", paper)) as fq, open(data_path("full", paper)) as ff:
        return quick_vs_full(fq.read(), ff.read())


def update_comparison(paper: str) -> None:
    path = os.path.join(ROOT, PAGE[paper])
    with open(path) as f:
        text = f.read()
    with open(path, "w") as f:
        f.write(replace_between(text, paper, compare_block(paper), "quick-vs-full"))
    print(f"{PAGE[paper]}: quick vs full verdicts of {paper} updated")


def replace_between(text: str, paper: str, body: str, mode: str = "quick") -> str:
    tag = mode if mode == "quick-vs-full" else f"{mode}-claims"
    start, end = f"<!-- {tag}:{paper} -->", f"<!-- /{tag}:{paper} -->"
    pat = re.compile(re.escape(start) + r".*?" + re.escape(end), re.S)
    if not pat.search(text):
        raise ValueError(f"marker {start} not found")
    return pat.sub(lambda _: f"{start}\n\n{body}\n{end}", text)


def main(argv=None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--compare"]:
        for paper in argv[1:] or PAPERS:
            update_comparison(paper)
        return
    mode = "full" if "--full" in argv else "quick"
    argv = [a for a in argv if a != "--full"]
    if not argv or any(p not in PAPERS for p in argv[1:]):
        raise SystemExit("usage: python docs/update_claims.py [--full] RUN_DIR [PAPER ...] (RUN_DIR: the --out of "
                         "reproduce all --quick, or of reproduce all with --full; default: every paper), or "
                         "python docs/update_claims.py --compare [PAPER ...]")
    run = argv[0]
    for paper in argv[1:] or PAPERS:
        report = os.path.join(run, paper, "report.md")
        with open(report) as f:
            body = claims_blocks(f.read())
        shutil.copyfile(report, data_path(mode, paper))
        for rel in (PAGE[paper],):
            path = os.path.join(ROOT, rel)
            with open(path) as f:
                text = f.read()
            with open(path, "w") as f:
                f.write(replace_between(text, paper, body, mode))
            print(f"{rel}: {mode} claims of {paper} updated")
        update_comparison(paper)


if __name__ == "__main__":
    main()
