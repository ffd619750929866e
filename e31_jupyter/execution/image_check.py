"""Run inside a job's container image, the way a job runs: ``python -m e31_jupyter.execution.image_check IMAGE``.

Prints one line of JSON: ``python`` (its version), ``cannot_run`` (what stops the worker: too old
a Python, a missing module) and ``report`` (why the HTML report would fail, "" when it renders).
Written for any Python 3: an old one must still be able to say that it is too old.
"""

import json
import sys

NEEDED = ("papermill", "ipykernel")  # what the worker imports to run a notebook


def check(image):
    # A type comment, not an annotation: this runs on the image's Python, however old.
    result = {"python": sys.version.split()[0], "cannot_run": [], "report": ""}  # type: dict
    if sys.version_info < (3, 10):  # noqa: UP036 (this runs on the image's Python, whatever it is)
        result["cannot_run"].append("Python %s is older than 3.10" % result["python"])  # noqa: UP031
        return result
    for module in NEEDED:
        try:
            __import__(module)
        except Exception as error:  # noqa: BLE001 (a module that fails to import, however it fails)
            result["cannot_run"].append("%s: %s" % (type(error).__name__, error))  # noqa: UP031
    result["report"] = report_problem(image)
    return result


def report_problem(image):
    """Why a report would fail in this image ("" when a small notebook renders)."""
    try:
        import nbconvert
        import nbformat

        notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("![plot](plot.png)")])
        nbconvert.HTMLExporter().from_notebook_node(notebook)
        return ""
    except Exception as error:  # noqa: BLE001 (whatever nbconvert raises is the answer)
        from e31_jupyter.execution.outputs import report_problem as explain

        return explain(error, image)


if __name__ == "__main__":
    print(json.dumps(check(sys.argv[1] if len(sys.argv) > 1 else "")))
