"""The shapes of one Check and claim: the types its data is made into, from the HTTP request to the HTTP answer, on
each store (issue 32).

A request copied from one shape into the next is a corridor: each copy is a type to read, a place where a field
can be renamed or dropped, and a cost. The issue counted eleven (ClaimRequest, CheckAndClaim, Caller, Intent,
Claim, row, entity, Claim, Verdict, ClaimAnswer, ClaimResponse); its target is at most five. The request is
now made into four types of OnceGate's, each once: the wire's ``ClaimRequest``; the ``Intent`` the edge parses it
into and the claim service identifies, which the decision, the answer, the history and the inventory read; the
``Claim`` to write; the ``ClaimAnswer`` the decision table gives and the run is told, which the answer's JSON is
written from (``claims.claim_members``): the wire's ``ClaimResponse`` declares that JSON, and is made by no
request (tests/http/test_claim_members.py holds the two to each other). Below the store's port the claim also
takes the store's own form, SQLite's row parameters or Table Storage's entity (a tuple, a dict: no type of
OnceGate's, so not seen here): five, counted with it.

The test records every type of OnceGate's that is made while the app's own ``check_and_claim`` function
answers one new key on a warm instance (as ``test_walk`` does), and names each: a shape above, or a part of
one. A type made that it does not name fails it: a shape coming back (a command beside the intent, a verdict
beside the answer) shows here first. Name a new type a part only if it carries none of the request's data
onward (a value inside a shape, or a line written beside the claim).
"""

from __future__ import annotations

import enum
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

import pytest
from pydantic import BaseModel

from oncegate.domain.records import Flow
from oncegate.models import FlowRef
from tests.http.test_walk import check_and_claim

# The shapes of OnceGate's the request's data passes through, in order (the store's row or entity comes between
# Claim and ClaimAnswer, as a plain tuple or dict).
SHAPES = [
    "oncegate.models.claim_requests.ClaimRequest",
    "oncegate.domain.decisions.Intent",
    "oncegate.domain.records.Claim",
    "oncegate.domain.decisions.ClaimAnswer",
]
# What is made on the way without being the request's data in another form.
PARTS = {
    # The operation table's envelope of a request: its parsed body and who called.
    "oncegate.entrypoints.operations.table.Call",
    # Values inside the intent and the claim: the calling flow, the key and data under one secret, its fingerprint.
    "oncegate.domain.records.Flow",
    "oncegate.domain.decisions.Identity",
    "oncegate.domain.keys.Fingerprint",
    # The history line the answer leaves beside the claim.
    "oncegate.domain.records.HistoryEvent",
}
# Table Storage's batch reads each part of the store's answer into one of its own; a SQLite write holds its
# transaction (its locks, BEGIN IMMEDIATE and COMMIT or ROLLBACK) in one: neither carries the request's data.
STORE_PARTS = {
    "sqlite": {"oncegate.stores.sqlite._Transaction"},
    "tables": {"oncegate.stores.tables.batch.PartResponse"},
}
# How a type's instance is made: its __init__ or __new__ in Python, or pydantic validating a model.
MAKERS = frozenset({"__init__", "__new__", "model_validate", "model_validate_json"})


@pytest.fixture(params=["sqlite", pytest.param("tables", marks=pytest.mark.azurite)])
def store_kind(request: pytest.FixtureRequest) -> str:
    """Both stores: what the store makes differs below its port."""
    kind: str = request.param
    return kind


@contextmanager
def profiling(profile: Callable[[FrameType, str, Any], None]) -> Iterator[None]:
    """``profile`` called for every call in this thread while the block runs."""
    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        yield
    finally:
        sys.setprofile(previous)


def made_types(key: str) -> list[str]:
    """The types of OnceGate's made while one Check and claim is answered, in the order first made."""
    made: dict[str, None] = {}

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        code = frame.f_code
        if event != "call" or code.co_name not in MAKERS or not code.co_varnames:
            return
        value = frame.f_locals.get(code.co_varnames[0])  # self, or cls for pydantic's classmethods
        kind = value if isinstance(value, type) else type(value)
        if kind.__module__.startswith("oncegate.") and not issubclass(kind, enum.Enum):  # a member looked up
            made.setdefault(f"{kind.__module__}.{kind.__qualname__}", None)

    with profiling(profile):
        response = check_and_claim(key)
    assert response.status_code == 200, response.get_body()
    return list(made)


def test_one_check_and_claim_passes_through_five_shapes(store_kind: str) -> None:
    assert check_and_claim("ORDER-1").status_code == 200  # warms the instance: settings, rules, key ring

    made = made_types("ORDER-2")

    listed = "\n".join(made)
    unnamed = set(made) - set(SHAPES) - PARTS - STORE_PARTS[store_kind]
    assert not unnamed, f"made on {store_kind} and named neither a shape nor a part: {sorted(unnamed)}\n{listed}"
    shapes = [kind for kind in made if kind in SHAPES]
    assert shapes == SHAPES, f"the shapes made on {store_kind}, in order:\n{listed}"


@pytest.mark.parametrize("store_kind", ["sqlite"], indirect=True)
def test_the_measure_sees_a_wire_model_and_a_record_made() -> None:
    """The profiler sees pydantic's validation (no __init__ runs for it) and a quick record's __init__ (written by
    ``oncegate.domain.copies``, whose code is no file of OnceGate's)."""
    seen: list[str] = []

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code.co_name in MAKERS:
            value = frame.f_locals.get(frame.f_code.co_varnames[0])
            seen.append((value if isinstance(value, type) else type(value)).__name__)

    with profiling(profile):
        FlowRef.model_validate({"name": "Create order", "environment": "Default"})
        Flow("Create order", "Default")
    assert issubclass(FlowRef, BaseModel)
    assert seen == ["FlowRef", "Flow"]
