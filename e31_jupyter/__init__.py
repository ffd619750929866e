"""e31-jupyter: Jupyter as the front door of an on-demand GPU queue."""

__version__ = "0.1.0"


def _jupyter_server_extension_points():
    from e31_jupyter.server.extension import E31Extension

    return [{"module": "e31_jupyter.server.extension", "app": E31Extension}]


def load_ipython_extension(ipython):
    """``%load_ext e31_jupyter``: the %%e31 / %e31 magics."""
    from e31_jupyter.magics import load_ipython_extension as load

    load(ipython)
