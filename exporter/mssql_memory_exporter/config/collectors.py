"""`collectors:` in a target, or at the top level as every target's default: which collectors run."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Self

from pydantic import ValidationInfo, model_validator

from ..collectors import COLLECTORS
from ..collectors.base import CollectorRecord
from ..scrape.selection import enabled_names, known_names
from .errors import error_at
from .fields import Strict
from .volumes import list_twice

COLLECTOR_NAMES = frozenset(record.name for record in COLLECTORS)


class CollectorsConfig(Strict):
    """Either `include` (only these run) or `exclude` (all but these run), by collector name."""

    include: list[str] | None = None
    exclude: list[str] | None = None

    @model_validator(mode="after")
    def _one_known_list(self, info: ValidationInfo) -> Self:
        if self.include is not None and self.exclude is not None:
            raise error_at(("exclude",), "set either include or exclude, not both")
        if self.include is None and self.exclude is None:
            raise error_at((), "give include (only these run) or exclude (all but these run)")
        field, names = ("include", self.include) if self.include is not None else ("exclude", self.exclude)
        assert names is not None
        if field == "include" and not names:
            raise error_at((field,), "is empty: a target without collectors would report only mssql_up")
        # The config's custom collectors are collectors too (config/custom.py, read before the rest).
        known = (info.context or {}).get("collector_names", COLLECTOR_NAMES)
        for index, name in enumerate(names):
            if name not in known:
                listed = known_names(COLLECTORS) + "".join(f", {n}" for n in sorted(known - COLLECTOR_NAMES))
                raise error_at((field, index), f"unknown collector {name[:64]!r}; known: {listed}")
        list_twice(names, field)
        return self

    def enabled(self, collectors: Sequence[CollectorRecord] = COLLECTORS) -> frozenset[str]:
        return enabled_names(collectors, self.include, self.exclude)


ALL_COLLECTORS = frozenset(COLLECTOR_NAMES)
