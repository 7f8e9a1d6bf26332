"""Vertex AI training workbench: job model, per-replica environment, local runner."""

__version__ = "0.1.0"


def load_ipython_extension(ipython):  # type: ignore[no-untyped-def]
    """`%load_ext jupyter_ext`: the magics, and `vertex_pools()` in the notebook's namespace."""
    import importlib.util

    from . import waiting
    from .magics import VertexTrainMagics

    magics = VertexTrainMagics(ipython)
    ipython.register_magics(magics)
    waiting.install(ipython, magics)
    if importlib.util.find_spec("ipywidgets") is None:  # the widgets need ipywidgets
        return
    from widgets import vertex_pools

    ipython.push({"vertex_pools": vertex_pools})


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    """jupyter_server's entry point: the routes behind the lab panel (imported by the server only)."""
    from .handlers import _jupyter_server_extension_points as points

    return points()


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    """Where the built JupyterLab front end is: `jupyter_ext/labextension`."""
    from .handlers import _jupyter_labextension_paths as paths

    return paths()
