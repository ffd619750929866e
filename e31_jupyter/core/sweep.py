"""A sweep: one notebook submitted once per point of a grid of parameter values.

``e31 submit NB --sweep lr 0.1 0.01 --sweep batch 32 64`` is four jobs, one per combination,
each an ordinary job of its own (queued, run, charged and collected alone), named after its
point: ``train[lr=0.1,batch=32]``. Pure: the CLI and the magics do the submitting.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from itertools import product
from typing import Any

from e31_jupyter.core.errors import InvalidRequest

MAX_SWEEP_JOBS = 500  # more is almost surely a typo in a grid; submit in parts if meant


def points(grid: Sequence[Sequence[str]], fixed: dict, typed: Callable[[str], Any]) -> list[dict]:
    """Every combination of the grid's values, as parameters: ``grid`` is ``[[name, value, ...],
    ...]`` (or ``[["name=value,value"], ...]``) as given on the command line, ``typed`` turns a
    value's text into its value. [{}] for no grid. A name swept twice, or also fixed by ``-p``,
    is refused."""
    grid = [_axis(given) for given in grid]
    seen: set[str] = set()
    for name, *values in grid:
        if not values:
            raise InvalidRequest(
                f"--sweep {name} has no values: give the name, then each value (--sweep {name} 1 2 3)."
            )
        if name in seen:
            raise InvalidRequest(f"--sweep {name} is given twice; give all its values in one --sweep.")
        if name in fixed:
            raise InvalidRequest(f"{name} is both swept (--sweep) and set (-p, -r, -y or -f); keep one.")
        seen.add(name)
    count = 1
    for _, *values in grid:
        count *= len(values)
    if count > MAX_SWEEP_JOBS:
        raise InvalidRequest(
            f"The sweep would submit {count} jobs, more than {MAX_SWEEP_JOBS} at once. Sweep fewer values, "
            "or submit it in parts."
        )
    names = [name for name, *_ in grid]
    axes = [[typed(value) for value in values] for _, *values in grid]
    return [dict(zip(names, combination)) for combination in product(*axes)]


def _axis(given: Sequence[str]) -> list[str]:
    """``--sweep lr 0.1 0.2`` as given, or ``--sweep lr=0.1,0.2``: [name, value, ...]."""
    name, equals, listed = given[0].partition("=")
    if not equals:
        return list(given)
    if len(given) > 1 or not name.isidentifier():
        raise InvalidRequest(
            f"--sweep {' '.join(given)}: give the name, then each value (--sweep {name} 1 2 3), "
            f"or the name and its values in one (--sweep {name}=1,2,3)."
        )
    return [name, *(value for value in listed.split(",") if value)]


def label(point: dict) -> str:
    """``lr=0.1,batch=32``."""
    return ",".join(f"{name}={value}" for name, value in point.items())


def bodies(body: dict, grid_points: list[dict], name: str) -> list[dict]:
    """The submit body once per point: its parameters added, named ``name[point]``."""
    if grid_points == [{}]:
        return [body]
    return [
        {**body, "parameters": {**body.get("parameters", {}), **point}, "name": f"{name}[{label(point)}]"}
        for point in grid_points
    ]


def renamed(name: str, parameters: dict) -> str:
    """A sweep point's name (``train[lr=0.1,epochs=5]``) with the values ``parameters`` now give
    the names in it, so that a point run again with other values says so; any other name as it is."""
    match = re.fullmatch(r"(.*)\[([^\[\]]*)\]", name)
    if match is None:
        return name
    base, inside = match.groups()
    names = [pair.partition("=")[0] for pair in inside.split(",")]
    if not all("=" in pair for pair in inside.split(",")) or not all(n in parameters for n in names):
        return name
    return f"{base}[{label({n: parameters[n] for n in names})}]"
