"""e31-jupyter: Jupyter as the front door of an on-demand GPU queue."""

__version__ = "0.1.0"


def _jupyter_server_extension_points():
    from .server.extension import E31Extension

    return [{"module": "e31_jupyter.server.extension", "app": E31Extension}]
