"""ipywidgets views over jupyter_ext; imported lazily, so `import widgets` stays cheap."""

from __future__ import annotations

import importlib
from typing import Any

# public name -> module that defines it
_EXPORTS = {
    "PoolConfigurator": "pools",
    "ClusterInspector": "inspector",
    "JobMonitor": "monitor",
    "TuningMonitor": "tuning",
}
__all__ = sorted([*_EXPORTS, "vertex_pools"])


def vertex_pools(spec: Any = None, **kwargs: Any) -> Any:
    """A PoolConfigurator, as `PoolConfigurator(spec, **kwargs)`: `spec` (positional or keyword) loads a
    job (anything JobSpec.load accepts). What `%load_ext jupyter_ext` puts in the notebook: the widgets
    load when it is first called."""
    from .pools import PoolConfigurator

    return PoolConfigurator(spec, **kwargs)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
