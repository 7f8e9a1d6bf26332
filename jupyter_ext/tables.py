"""Plain-text tables, as `vtrain` and the text reports print them."""

from __future__ import annotations

from typing import Sequence


def text_table(rows: Sequence[Sequence[str]]) -> list[str]:
    """One line per row, each column padded to its widest cell; the last column is not padded."""
    widths = [max(len(row[c]) for row in rows) for c in range(len(rows[0]) - 1)]
    return ["  ".join([cell.ljust(w) for cell, w in zip(row, widths)] + [row[-1]]).rstrip() for row in rows]
