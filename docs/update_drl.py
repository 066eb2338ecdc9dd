"""Copy the tables of ``clustergym drl`` runs into docs/drl.md.

    .venv/bin/clustergym drl --envs p1 --out runs/drl-p1       # one folder per env, or all envs in one
    .venv/bin/python docs/update_drl.py runs/drl-p1 runs/drl-p2 runs/drl-p3 runs/drl-p4

Each benchmark folder's ``table.md`` (its first line names the command and the commit; then one section per
env: the main table, the ablation table and the default-horizon table) replaces the text between the
markers ``<!-- drl-tables:<env> -->`` and ``<!-- /drl-tables:<env> -->`` of docs/drl.md, so the page shows
the tables the command printed. The learning-curve figures are copied into docs/figures.

A folder given as ``<folder>=<marker>`` writes its one env's section between ``<!-- drl-tables:<marker> -->`` and
``<!-- /drl-tables:<marker> -->`` instead (a re-measurement of some rows beside the full tables) and copies no
figure::

    .venv/bin/python docs/update_drl.py runs/drl-p4-gap=p4-today
"""

from __future__ import annotations

import os
import re
import shutil
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGE = os.path.join(ROOT, "docs", "drl.md")


def sections(table: str) -> dict[str, str]:
    """``{env key: its section}`` of one table.md, each section prefixed with the file's command line."""
    lines = table.rstrip("\n").split("\n")
    command = lines[0]
    out: dict[str, list[str]] = {}
    key = None
    for ln in lines[1:]:
        m = re.match(r"### (P\d\w*) ", ln)
        if m:
            key = m.group(1).lower()
            out[key] = []
            continue
        if ln.startswith("Total wall time"):
            command += " " + ln
            continue
        if key is not None:
            out[key].append(ln)
    return {k: command + "\n" + "\n".join(v).strip("\n") for k, v in out.items()}


def main(folders: list[str]) -> int:
    with open(PAGE, encoding="utf-8") as f:
        page = f.read()
    done = []
    for arg in folders:
        folder, _, marker = arg.partition("=")
        with open(os.path.join(folder, "table.md"), encoding="utf-8") as f:
            secs = sections(f.read())
        if marker and len(secs) != 1:
            raise SystemExit(f"{folder}: {len(secs)} env sections; <folder>=<marker> needs exactly one")
        for key, text in secs.items():
            name = marker or key
            start, end = f"<!-- drl-tables:{name} -->", f"<!-- /drl-tables:{name} -->"
            if start not in page or end not in page:
                raise SystemExit(f"docs/drl.md has no markers {start} ... {end}")
            i, j = page.index(start) + len(start), page.index(end)
            page = page[:i] + "\n" + text + "\n" + page[j:]
            fig = os.path.join(folder, f"drl_{key}_curves.png")
            if os.path.exists(fig) and not marker:  # a re-measurement keeps the page's figures
                shutil.copy(fig, os.path.join(ROOT, "docs", "figures", os.path.basename(fig)))
            done.append(name)
    with open(PAGE, "w", encoding="utf-8") as f:
        f.write(page)
    print(f"docs/drl.md: tables of {', '.join(done)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
