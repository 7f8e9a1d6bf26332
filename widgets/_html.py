"""Small HTML pieces shared by the widgets, and their static (no front end) output.

Inline styles only: the same HTML goes into live `HTML` widgets and into the
`text/html` of a widget's mimebundle, which nbconvert shows when there is no
widget front end.
"""

from __future__ import annotations

from html import escape
from typing import Any

import pandas as pd

from jupyter_ext.cost import Estimate, money

RED, GREEN, GREY = "#c5221f", "#188038", "#5f6368"
_PRE = ("margin:2px 0;padding:6px 8px;background:rgba(127,127,127,0.08);border-radius:4px;"
        "font-size:12px;line-height:1.35;white-space:pre;overflow:auto;{extra}")


def pre(text: str, max_height: str = "") -> str:
    style = _PRE.format(extra=f"max-height:{max_height};" if max_height else "")
    return f'<pre style="{style}">{escape(text, quote=False)}</pre>'


def heading(text: str) -> str:
    return f'<div style="font-weight:600;margin:8px 0 2px">{escape(text)}</div>'


def note(text: str, colour: str = GREY) -> str:
    return f'<div style="color:{colour};margin:2px 0">{escape(text)}</div>'


def problem_list(problems: list[str]) -> str:
    """Red, one line per problem; "valid" in green when there is none."""
    if not problems:
        return f'<div class="vtrain-valid" style="color:{GREEN};font-weight:600">valid</div>'
    items = "".join(f"<li>{escape(p)}</li>" for p in problems)
    return f'<ul class="vtrain-problems" style="color:{RED};margin:2px 0;padding-left:18px">{items}</ul>'


def cost(estimate: Estimate, titles: dict[int, str] | None = None) -> str:
    """The estimate's one-line summary (the job's total, labelled with the prices' date), a row per
    pool (on demand and Spot per hour, or what has no price), then what is not priced, in grey.
    `titles` names the pools by position (default: workerPoolSpecs[N])."""
    titles = titles or {}
    rows = []
    for p in estimate.pools:
        shape = f"{p.replicas} x {p.machine_type}" + (f" + {p.accelerator_count} x {p.accelerator}"
                                                      if p.accelerator else "")
        on_demand, spot = p.total(), p.total(spot=True)
        prices = ([f"{money(on_demand)}/h", f"{money(spot)}/h"] if on_demand is not None and spot is not None
                  else ["not priced", "not priced"])
        cells = [titles.get(p.position, f"workerPoolSpecs[{p.position}]"), shape, *prices]
        rows.append(f'<tr data-pool="{p.position}">' + "".join(
            f'<td style="padding:0 8px 0 0">{escape(c)}</td>' for c in cells) + "</tr>")
    head = "".join(f'<th style="text-align:left;padding:0 8px 0 0">{h}</th>'
                   for h in ("Pool", "Machines", "On demand", "Spot"))
    lines = [f'<div class="vtrain-cost" style="margin:2px 0">{escape(estimate.summary())}</div>',
             f'<table class="vtrain-cost-pools" style="font-size:12px"><tr>{head}</tr>{"".join(rows)}</table>']
    lines += [note(f"not priced: {line}") for line in estimate.unpriced]
    return "".join(lines)


def frame(df: pd.DataFrame, max_rows: int = 60, header: list[str] | None = None) -> str:
    """A DataFrame as an HTML table; `header` renames the columns for display."""
    if header:
        df = df.set_axis(header, axis="columns")
    return df.to_html(index=False, border=0, max_rows=max_rows, classes="vtrain-table")


def side_by_side(*blocks: tuple[str, str]) -> str:
    """(title, html) blocks in a row that wraps on narrow screens."""
    cells = "".join(f'<div style="flex:1 1 320px;min-width:0">{heading(t)}{body}</div>' for t, body in blocks)
    return f'<div style="display:flex;flex-wrap:wrap;gap:12px">{cells}</div>'


class StaticRepr:
    """Adds `text/html` (from `to_html()`) and a readable `text/plain` (from `to_text()`)
    next to ipywidgets' own widget view in the mimebundle."""

    def to_html(self) -> str:
        raise NotImplementedError

    def to_text(self) -> str:
        return type(self).__name__

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        bundle = super()._repr_mimebundle_(**kwargs) or {}  # type: ignore[misc]
        bundle["text/html"] = self.to_html()
        bundle["text/plain"] = self.to_text()
        return bundle
