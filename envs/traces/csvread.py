"""Strict CSV reading shared by every trace loader (SPEC §9).

Malformed files fail with a ``TraceFormatError`` (a ValueError) naming the file, the line and the
column: a missing column, a non-numeric value where a number is expected, an empty file.
"""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass
from datetime import datetime
from typing import Callable, Sequence

import numpy as np

__all__ = ["TraceFormatError", "Column", "read_csv"]


class TraceFormatError(ValueError):
    """A trace file does not have the published format."""


@dataclass(frozen=True)
class Column:
    name: str
    kind: str = "float"  # "float", "int", "str", "datetime" (seconds since the epoch, UTC-naive)
    required: bool = True
    default: object = None  # value for an empty cell (None: an empty cell is an error for numbers)


def _parse(kind: str, text: str, default):
    if text == "" and default is not None:
        return default
    if kind == "str":
        return text
    if kind == "float":
        v = float(text)
        if not np.isfinite(v):
            raise ValueError
        return v
    if kind == "int":
        f = float(text)
        if not f.is_integer():
            raise ValueError
        return int(f)
    if kind == "datetime":
        return datetime.fromisoformat(text).timestamp()
    raise AssertionError(kind)


def read_csv(path: str | os.PathLike, columns: Sequence[Column], *, max_rows: int | None = None) -> dict[str, np.ndarray]:
    """Read ``columns`` of a CSV file with a header line into arrays, validating every cell.

    Returns a dict column name -> array (float64, int64, float64 seconds for datetimes, or object
    for strings). Raises FileNotFoundError for a missing file and TraceFormatError for anything
    malformed, with ``file:line: column 'name': ...`` in the message.
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"trace file not found: {path}")
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        try:
            header = next(reader)
        except StopIteration:
            raise TraceFormatError(f"{path}:1: empty file (expected a header line)") from None
        header = [h.strip() for h in header]
        index = {}
        for col in columns:
            if col.name in header:
                index[col.name] = header.index(col.name)
            elif col.required:
                raise TraceFormatError(f"{path}:1: missing column {col.name!r} (header has: {', '.join(header)})")
        out: dict[str, list] = {c.name: [] for c in columns if c.name in index}
        n = 0
        for lineno, row in enumerate(reader, start=2):
            if not row or all(not cell.strip() for cell in row):
                continue
            for col in columns:
                if col.name not in index:
                    continue
                j = index[col.name]
                if j >= len(row):
                    raise TraceFormatError(f"{path}:{lineno}: column {col.name!r} (column {j + 1}) is missing "
                                           f"(row has {len(row)} fields)")
                cell = row[j].strip()
                try:
                    out[col.name].append(_parse(col.kind, cell, col.default))
                except (ValueError, OverflowError):
                    want = {"float": "a number", "int": "an integer", "datetime": "a date-time"}.get(col.kind, col.kind)
                    raise TraceFormatError(f"{path}:{lineno}: column {col.name!r} (column {j + 1}): "
                                           f"{cell!r} is not {want}") from None
            n += 1
            if max_rows is not None and n >= max_rows:
                break
        if n == 0:
            raise TraceFormatError(f"{path}:2: no data rows")
    dtypes = {"float": np.float64, "int": np.int64, "datetime": np.float64, "str": object}
    return {c.name: np.asarray(out[c.name], dtype=dtypes[c.kind]) for c in columns if c.name in out}
