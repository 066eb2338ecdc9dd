"""The papers' "quick mode against full mode" tables (docs/update_claims.py): generated from the quick and full
reports kept in docs/data, so the pages cannot drift from them; and the pairing rule on hand-made reports."""

import importlib.util
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _update_claims():
    spec = importlib.util.spec_from_file_location("update_claims_under_test", os.path.join(ROOT, "docs",
                                                                                          "update_claims.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


UC = _update_claims()
HEAD = "| claim | paper | ours: mean [95% interval] over instances | ratio of totals | wins / losses (ties) | verdict |"


@pytest.mark.parametrize("paper", UC.PAPERS)
def test_each_page_shows_the_table_generated_from_the_kept_reports(paper):
    with open(os.path.join(ROOT, UC.PAGE[paper])) as f:
        page = f.read()
    m = re.search(rf"<!-- quick-vs-full:{paper} -->\n\n(.*?)\n<!-- /quick-vs-full:{paper} -->", page, re.S)
    assert m, f"{UC.PAGE[paper]} has no quick-vs-full block"
    assert m.group(1) == UC.compare_block(paper), f"run: .venv/bin/python docs/update_claims.py --compare {paper}"


def _report(rows, title="Claims"):
    lines = [f"## {title}", "", HEAD, "|---|---|---|---|---|---|"]
    lines += [f"| {c} | p | +1.0% [+0.5, +1.5] | – | 3 / 1 | **{v}** |" for c, v in rows]
    return "\n".join(lines + ["", "Verdicts (docs/evaluation.md): ...", ""])


def test_claims_pair_across_modes_with_the_mode_numbers_set_aside_and_only_differences_are_listed():
    quick = _report([("Fig. 4 (24 jobs): A > B", "inconclusive"), ("Fig. 4 (60 jobs): A > B", "reproduced"),
                     ("Fig. 7: A reaches 60–80% (T = 300)", "reproduced"), ("quick only at x", "reproduced")])
    full = _report([("Fig. 4 (100 jobs): A > B", "reproduced"), ("Fig. 4 (200 jobs): A > B", "reproduced"),
                    ("Fig. 7: A reaches 60–80% (T = 8,000)", "not reproduced (higher)"),
                    ("Fig. 12, \\|R\\| = 20: full only", "reproduced")])
    text = UC.quick_vs_full(quick, full)
    assert "3 claims are judged in both modes" in text and "1 in full mode only and 1 in quick mode only" in text
    assert "**2 of the 3** get a different verdict" in text
    rows = [ln for ln in text.splitlines() if ln.startswith("| Claims |")]
    assert rows == ["| Claims | Fig. 4 (100 jobs): A > B | inconclusive | reproduced |",
                    "| Claims | Fig. 7: A reaches 60–80% (T = 8,000) | reproduced | not reproduced (higher) |"]


def test_figure_numbers_are_kept_when_pairing():
    text = UC.quick_vs_full(_report([("Fig. 4: A > B", "reproduced")]), _report([("Fig. 7: A > B", "inconclusive")]))
    assert text.startswith("0 claims are judged in both modes") and "**0 of the 0**" in text and "| Claims |" not in text


def test_the_table_heading_is_the_full_reports():
    text = UC.quick_vs_full(_report([("A > B", "reproduced")], "Setting one (10 instances)"),
                            _report([("A > B", "inconclusive")], "Setting one (20 instances)"))
    assert "| Setting one (20 instances) | A > B | reproduced | inconclusive |" in text


def test_a_claim_pairs_only_within_its_table():
    # the same claim under two settings in quick mode; full mode has only the second setting's table
    quick = _report([("A > B", "reproduced")], "setting = one") + _report([("A > B", "inconclusive")], "setting = two")
    full = _report([("A > B", "inconclusive")], "setting = two")
    text = UC.quick_vs_full(quick, full)
    assert "**0 of the 1** get a different verdict" in text and "0 in full mode only and 1 in quick mode only" in text
