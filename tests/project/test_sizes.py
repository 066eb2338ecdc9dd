"""One idea per function and per file: no function over 80 lines, no source file over 500 lines.

Counted on every Python file of the repository outside ``tests/`` (the package, its wings, the benchmarks,
the examples and the docs' page generator): a function from its ``def`` line to its last line
(decorators aside), a file by its lines. The check runs on the files themselves, so a long function
added anywhere fails it.
"""

from __future__ import annotations

import ast
import pathlib

from tests.helpers import ROOT

MAX_FUNCTION_LINES = 80
MAX_FILE_LINES = 500
FOLDERS = ("clustergym", "envs", "agents", "baselines", "benchmarks", "examples", "docs")


def sources() -> list[pathlib.Path]:
    """The Python files the limits apply to."""
    return sorted(p for folder in FOLDERS for p in (ROOT / folder).rglob("*.py")
                  if "__pycache__" not in p.parts)


def long_functions(text: str, limit: int = MAX_FUNCTION_LINES) -> list[tuple[str, int, int]]:
    """``(name, first line, lines)`` of every function (methods and nested ones too) longer than ``limit``."""
    return [(node.name, node.lineno, node.end_lineno - node.lineno + 1)
            for node in ast.walk(ast.parse(text))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > limit]


def test_the_check_sees_the_sources_and_a_long_function():
    files = {p.relative_to(ROOT).as_posix() for p in sources()}
    assert {"clustergym/cli/main.py", "envs/approxjobs/env.py", "agents/esdp.py", "docs/gen_pages.py"} <= files
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    assert long_functions(f"def f():\n{body}\n") == [("f", 1, MAX_FUNCTION_LINES + 1)]
    assert long_functions(f"class A:\n    def g(self):\n    {body.replace(chr(10), chr(10) + '    ')}\n") != []
    assert long_functions(f"def f():\n{body[:body.rindex(chr(10))]}\n") == []


def test_no_function_over_80_lines():
    found = [f"{p.relative_to(ROOT)}:{line} {name} ({n} lines)"
             for p in sources() for name, line, n in long_functions(p.read_text(encoding="utf-8"))]
    assert not found, "split these into named steps:\n" + "\n".join(found)


def test_no_source_file_over_500_lines():
    found = [f"{p.relative_to(ROOT)} ({n} lines)" for p in sources()
             if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_FILE_LINES]
    assert not found, "split these by idea:\n" + "\n".join(found)
