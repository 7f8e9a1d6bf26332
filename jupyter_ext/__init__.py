"""Vertex AI training workbench: job model, per-replica environment, local runner."""

__version__ = "0.1.0"


def load_ipython_extension(ipython):  # type: ignore[no-untyped-def]
    """`%load_ext jupyter_ext`: the magics, and `vertex_pools()` in the notebook's namespace."""
    from .magics import VertexTrainMagics

    ipython.register_magics(VertexTrainMagics)
    try:
        from widgets import vertex_pools
    except ImportError:  # the widgets need ipywidgets
        return
    ipython.push({"vertex_pools": vertex_pools})
