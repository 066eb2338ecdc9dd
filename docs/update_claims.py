"""Copy the claims tables of a reproduction into the papers' pages.

    make reproduce                                   # clustergym reproduce all --quick --out runs/reproduce
    .venv/bin/python docs/update_claims.py runs/reproduce            # or name papers: ... runs/reproduce opm
    .venv/bin/python docs/update_claims.py --full runs/full          # full mode (clustergym reproduce all)

Every claims table of ``RUN/<paper>/report.md`` (a table whose header starts ``| claim | paper |``,
with the heading above it and the notes under it) replaces the text between the markers
``<!-- quick-claims:<paper> -->`` and ``<!-- /quick-claims:<paper> -->`` (``full-claims`` with ``--full``)
in docs/<paper>.md, so the tables the docs show are the ones the command printed. README.md quotes some of the
full-mode rows; tests/project/test_readme.py fails when a quoted row is no longer on its page.
"""

from __future__ import annotations

import os
import re
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


def replace_between(text: str, paper: str, body: str, mode: str = "quick") -> str:
    start, end = f"<!-- {mode}-claims:{paper} -->", f"<!-- /{mode}-claims:{paper} -->"
    pat = re.compile(re.escape(start) + r".*?" + re.escape(end), re.S)
    if not pat.search(text):
        raise ValueError(f"marker {start} not found")
    return pat.sub(lambda _: f"{start}\n\n{body}\n{end}", text)


def main(argv=None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    mode = "full" if "--full" in argv else "quick"
    argv = [a for a in argv if a != "--full"]
    if not argv or any(p not in PAPERS for p in argv[1:]):
        raise SystemExit("usage: python docs/update_claims.py [--full] RUN_DIR [PAPER ...] (RUN_DIR: the --out of "
                         "reproduce all --quick, or of reproduce all with --full; default: every paper)")
    run = argv[0]
    for paper in argv[1:] or PAPERS:
        with open(os.path.join(run, paper, "report.md")) as f:
            body = claims_blocks(f.read())
        for rel in (PAGE[paper],):
            path = os.path.join(ROOT, rel)
            with open(path) as f:
                text = f.read()
            with open(path, "w") as f:
                f.write(replace_between(text, paper, body, mode))
            print(f"{rel}: {mode} claims of {paper} updated")


if __name__ == "__main__":
    main()
