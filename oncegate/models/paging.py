"""Paging of a list, the inventory's and a claim's history: a module of its own, as a Check and claim never pages."""

from typing import Annotated

from pydantic import Field

from oncegate.models.base import ADVANCED, Cursor, QueryInteger, _Query, designer


class ListPageQuery(_Query):
    """Paging of a list: the inventory's, a claim's history."""

    top: Annotated[
        QueryInteger,
        designer("Page Size", "How many items one page holds, from 1 to 200 (50 when left empty).", ADVANCED),
    ] = Field(default=50, ge=1, le=200)
    cursor: Cursor = None
