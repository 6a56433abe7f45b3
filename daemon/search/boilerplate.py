"""Boilerplate leaves the ranking (decision 0026): a leg's hits lose the chunks many notes
share (a generated footer, a template's placeholder) unless the leg found nothing else, so a
query for the footer's own words still finds it when nothing else matches."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TypeVar

Hit = TypeVar("Hit", int, tuple[int, float])


def _id(hit: int | tuple[int, float]) -> int:
    return hit if isinstance(hit, int) else hit[0]


def without_boilerplate(shared: Callable[[Iterable[int]], set[int]],
                        *legs: list[Hit]) -> list[list[Hit]]:
    """Each leg (chunk ids, or (id, score) pairs, best first) without the chunks ``shared``
    names, but whole where every hit it has is one (one catalog lookup for all legs)."""
    ids = {_id(h) for leg in legs for h in leg}
    drop = shared(ids) if ids else set()
    if not drop:
        return list(legs)
    out: list[list[Hit]] = []
    for leg in legs:
        kept = [h for h in leg if _id(h) not in drop]
        out.append(kept or leg)
    return out


def legs_without_boilerplate(shared: Callable[[Iterable[int]], set[int]],
                             legs: Mapping[str, list[int]]) -> dict[str, list[int]]:
    """``without_boilerplate`` over named legs of chunk ids."""
    return dict(zip(legs, without_boilerplate(shared, *legs.values()), strict=True))
