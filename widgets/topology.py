"""The picture of a job's cluster: one labelled box per replica, as SVG.

Primary, workers and servers are drawn inside a frame (the training cluster);
evaluators outside it, since they are not part of it. The replicas come from
`cluster.replicas`, so the picture shows the addresses the replicas will read.
"""

from __future__ import annotations

from html import escape

from jupyter_ext import cluster

_ROLE_COLOURS = {"primary": "#1a73e8", "worker": "#188038", "parameter_server": "#e37400",
                 "reduction_server": "#a142f4", "evaluator": "#5f6368"}
_BOX_W, _BOX_H, _GAP, _PAD, _HEAD = 300, 40, 8, 12, 26


def topology_svg(replicas: list[cluster.Replica], max_per_pool: int = 6) -> str:
    """Primary, workers and servers inside a frame (<g id="training-cluster">), evaluators
    outside it (<g id="evaluators">); one labelled box per replica with its address."""
    by_pool: dict[int, list[cluster.Replica]] = {}
    for r in replicas:
        by_pool.setdefault(r.pool, []).append(r)

    def column(pos: int, x: int, y: int) -> tuple[str, int]:
        reps = by_pool[pos]
        title = {0: "primary", 1: "workers", 2: reps[0].role.replace("_", " ") + "s", 3: "evaluators"}[pos]
        parts = [f'<g class="pool" data-pool="{pos}">',
                 f'<text x="{x}" y="{y + 16}" class="pool-title">{escape(title)} ({len(reps)})</text>']
        top = y + _HEAD
        for r in reps[:max_per_pool]:
            colour = _ROLE_COLOURS.get(r.role, "#5f6368")
            tf = f" · {r.tf_task}:{r.index}" if r.tf_task else ""
            parts.append(
                f'<g class="replica" data-task="{escape(r.task_name)}" data-role="{escape(r.role)}">'
                f"<title>{escape(r.role)}</title>"
                f'<rect x="{x}" y="{top}" width="{_BOX_W}" height="{_BOX_H}" rx="5" fill="{colour}" '
                f'fill-opacity="0.12" stroke="{colour}"/>'
                f'<text x="{x + 8}" y="{top + 16}" font-weight="600">{escape(r.task_name + tf)}</text>'
                f'<text x="{x + 8}" y="{top + 32}" font-family="monospace" font-size="10">{escape(r.address)}</text>'
                "</g>")
            top += _BOX_H + _GAP
        if len(reps) > max_per_pool:
            parts.append(f'<text x="{x + 8}" y="{top + 14}" class="more">… and {len(reps) - max_per_pool} more '
                         f"(to {escape(reps[-1].task_name)})</text>")
            top += _BOX_H // 2 + _GAP
        parts.append("</g>")
        return "".join(parts), top

    x, bottom, cluster_parts = _PAD * 2, _PAD + 20, []
    for pos in (pos for pos in (0, 1, 2) if pos in by_pool):
        svg, top = column(pos, x, _PAD + 20)
        cluster_parts.append(svg)
        bottom = max(bottom, top)
        x += _BOX_W + _GAP * 2
    frame_w, frame_h = x - _GAP * 2, bottom - _PAD  # the frame spans x in [_PAD, _PAD + frame_w]
    width, height = _PAD * 2 + frame_w, bottom + _PAD
    evaluators = ""
    if 3 in by_pool:  # outside the frame: evaluators are not part of the training cluster
        svg, top = column(3, width + _PAD, _PAD + 20)
        evaluators = f'<g id="evaluators">{svg}</g>'
        width += _PAD + _BOX_W + _PAD
        height = max(height, top + _PAD)
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12" style="max-width:100%">'
            f'<g id="training-cluster"><rect x="{_PAD}" y="{_PAD}" width="{frame_w}" height="{frame_h}" rx="8" '
            f'fill="none" stroke="#9aa0a6" stroke-dasharray="6 4"/>'
            f'<text x="{_PAD * 2}" y="{_PAD + 14}" fill="#5f6368">training cluster</text>'
            f"{''.join(cluster_parts)}</g>{evaluators}</svg>")
