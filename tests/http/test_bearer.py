"""ONCEGATE_AUTH=entra: the app validates the bearer token itself, against a local tenant's published keys.

Every case runs through the Functions handlers and over HTTP through the local server. A refused
token is a 401 (with ``WWW-Authenticate: Bearer``) or a 403 in the error format, and the store is
byte for byte as it was.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import hmac
import json
import sqlite3
import time
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from oncegate import bootstrap
from oncegate.config import AuthMode, Settings
from oncegate.entrypoints import bearer
from tests.conftest import SQLITE_FILE
from tests.gate import Gate
from tests.http.client import Api, Reply
from tests.http.test_auth import principal_header
from tests.support.entra import CLIENT_ID, FLOW_APP_ID, LocalEntra, new_key

FLOW = "OnceGate.Flow"
REVIEWER = "OnceGate.Reviewer"
CLAIM = {"scope": "erp.create-order", "key": "ORDER-1", "runId": "r1", "fingerprint": "v1"}


@pytest.fixture(autouse=True)
def entra_mode(service: Gate, local_entra: LocalEntra, tmp_path: Path) -> None:
    settings = Settings.from_environment({"ONCEGATE_SQLITE_PATH": str(tmp_path / "unused.db")})
    entra = dataclasses.replace(settings, auth=AuthMode.ENTRA, entra=local_entra.api)
    bootstrap.use_services(service.services, settings=entra)


def bearer_header(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def flow(entra: LocalEntra, **claims: Any) -> dict[str, str]:
    return bearer_header(entra.token(entra.claims(FLOW, **claims)))


def reviewer(entra: LocalEntra, **claims: Any) -> dict[str, str]:
    """A person (a v1 token, as the CLI's device code sign-in may get) holding the reviewer role."""
    return bearer_header(entra.token(entra.claims(REVIEWER, version="1.0", **claims)))


def stored(tmp_path: Path) -> list[str]:
    """Everything the store holds, as SQL: equal before and after means nothing changed."""
    with closing(sqlite3.connect(tmp_path / SQLITE_FILE)) as database:
        return list(database.iterdump())


def open_conflict(api: Api, headers: dict[str, str]) -> str:
    assert api.call("check_and_claim", CLAIM, headers=headers).status == 200
    answer = api.call("check_and_claim", {**CLAIM, "runId": "r2", "fingerprint": "v2"}, headers=headers).body
    assert answer["decision"] == "conflict"
    return str(answer["conflictId"])


def _b64(data: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


def unsigned(entra: LocalEntra) -> dict[str, str]:
    """``alg: none``: the claims of a reviewer, and no signature at all."""
    header = {"alg": "none", "typ": "JWT", "kid": "key-1"}
    return bearer_header(f"{_b64(header)}.{_b64(entra.claims(REVIEWER))}.")


def hs256_with_the_public_key(entra: LocalEntra) -> dict[str, str]:
    """The key confusion attack: HMAC-signed with the tenant's public key, which anyone can download."""
    public = entra.keys["key-1"].public_key().public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo)
    signing_input = f"{_b64({'alg': 'HS256', 'typ': 'JWT', 'kid': 'key-1'})}.{_b64(entra.claims(REVIEWER))}"
    signature = base64.urlsafe_b64encode(hmac.new(public, signing_input.encode(), hashlib.sha256).digest())
    return bearer_header(f"{signing_input}.{signature.rstrip(b'=').decode()}")


Forge = Callable[[LocalEntra], dict[str, str]]
REFUSED: dict[str, tuple[Forge, int]] = {
    "no-token": (lambda entra: {}, 401),
    "not-bearer": (lambda entra: {"Authorization": "Basic YW5hOnNlY3JldA=="}, 401),
    "not-a-jwt": (lambda entra: bearer_header("not-a-token"), 401),
    "expired": (lambda entra: reviewer(entra, exp=int(time.time()) - 120), 401),
    "not-yet-valid": (lambda entra: reviewer(entra, nbf=int(time.time()) + 300), 401),
    "wrong-audience": (lambda entra: reviewer(entra, aud="api://another-api"), 401),
    "wrong-issuer": (lambda entra: reviewer(entra, iss="https://login.microsoftonline.com/another-tenant/v2.0"), 401),
    "wrong-issuer-v1": (lambda entra: reviewer(entra, iss="https://sts.windows.net/another-tenant/"), 401),
    "wrong-signature": (
        lambda entra: bearer_header(entra.token(entra.claims(REVIEWER), kid="key-1", key=new_key())),
        401,
    ),
    "unknown-key": (lambda entra: bearer_header(entra.token(entra.claims(REVIEWER), key=new_key(), kid="k9")), 401),
    "alg-none": (unsigned, 401),
    "hs256-with-the-public-key": (hs256_with_the_public_key, 401),
    "id-token": (lambda entra: reviewer(entra, appid=None), 401),
    "forged-principal-header": (lambda entra: principal_header("mallory@evil.example", REVIEWER), 401),
    "no-role": (lambda entra: bearer_header(entra.token(entra.claims())), 403),
    "another-apps-role": (lambda entra: bearer_header(entra.token(entra.claims("Contoso.Admin"))), 403),
}


@pytest.mark.parametrize(("forge", "status"), REFUSED.values(), ids=REFUSED.keys())
def test_a_refused_token_is_answered_in_the_error_format_and_changes_nothing(
    api: Api, local_entra: LocalEntra, tmp_path: Path, forge: Forge, status: int
) -> None:
    conflict_id = open_conflict(api, flow(local_entra))
    before = stored(tmp_path)
    headers = forge(local_entra)

    replies = [
        api.call("check_and_claim", {**CLAIM, "key": "ORDER-2"}, headers=headers),
        api.call("lookup_claim", {"scope": CLAIM["scope"], "key": CLAIM["key"]}, headers=headers),
        api.call(
            "resolve_conflict",
            {"decision": "dismiss", "reviewer": "x"},
            route={"conflictId": conflict_id},
            headers=headers,
        ),
    ]

    for reply in replies:
        assert (reply.status, reply.code) == (status, "unauthorized" if status == 401 else "forbidden")
        assert reply.body["error"]["message"]
        if status == 401:
            assert reply.headers["www-authenticate"].startswith("Bearer")
    assert stored(tmp_path) == before


def test_a_flow_token_claims_and_a_reviewer_token_resolves_recording_who_signed_in(
    api: Api, local_entra: LocalEntra
) -> None:
    conflict_id = open_conflict(api, flow(local_entra))
    body = {"decision": "keep_original", "reviewer": "somebody-else@contoso.com"}

    refused = api.call("resolve_conflict", body, route={"conflictId": conflict_id}, headers=flow(local_entra))
    resolved = api.call("resolve_conflict", body, route={"conflictId": conflict_id}, headers=reviewer(local_entra))

    assert (refused.status, refused.code) == (403, "forbidden")
    assert REVIEWER in refused.body["error"]["message"]
    assert resolved.status == 200
    assert resolved.body["resolution"]["reviewer"] == "ana@contoso.com"


def test_a_forged_principal_header_adds_no_role_to_a_flow_token(api: Api, local_entra: LocalEntra) -> None:
    conflict_id = open_conflict(api, flow(local_entra))
    headers = {**flow(local_entra), **principal_header("ana@contoso.com", REVIEWER)}

    reply = api.call("resolve_conflict", {"decision": "dismiss"}, route={"conflictId": conflict_id}, headers=headers)

    assert (reply.status, reply.code) == (403, "forbidden")
    assert api.call("get_conflict", route={"conflictId": conflict_id}, headers=headers).body["status"] == "open"


def test_a_flow_caller_may_not_do_what_only_reviewers_do(api: Api, local_entra: LocalEntra, tmp_path: Path) -> None:
    headers = flow(local_entra)
    conflict_id = open_conflict(api, headers)
    claimed = api.call("check_and_claim", {**CLAIM, "key": "ORDER-3"}, headers=headers).body
    failed = {"claimToken": claimed["claimToken"], "outcome": "failed", "retryable": False}
    assert api.call("record_result", failed, route={"claimId": claimed["claimId"]}, headers=headers).status == 200
    before = stored(tmp_path)

    replies: list[Reply] = [
        api.call("resolve_conflict", {"decision": "dismiss"}, route={"conflictId": conflict_id}, headers=headers),
        api.call("review_claim", {"note": "seen"}, route={"claimId": claimed["claimId"]}, headers=headers),
        api.call("register_flow", {"name": "A", "environment": "Prod", "enabled": False}, headers=headers),
        api.call("set_scope", {"scope": "erp.create-order"}, headers=headers),
    ]

    assert [(reply.status, reply.code) for reply in replies] == [(403, "forbidden")] * 4
    assert stored(tmp_path) == before
    reviewed = api.call(
        "review_claim", {"note": "seen"}, route={"claimId": claimed["claimId"]}, headers=reviewer(local_entra)
    )
    assert (reviewed.status, reviewed.body["reviewer"]) == (200, "ana@contoso.com")


def test_a_reviewer_may_do_what_a_flow_does_and_health_needs_no_token(api: Api, local_entra: LocalEntra) -> None:
    answer = api.call("check_and_claim", CLAIM, headers=reviewer(local_entra))

    assert (answer.status, answer.body["decision"]) == (200, "proceed")
    assert api.call("health").status == 200


@pytest.mark.parametrize(
    ("claims", "expires_in"),
    [
        ({"version": "2.0"}, 3600),
        ({"version": "1.0"}, 3600),
        ({"version": "2.0", "aud": f"api://{CLIENT_ID}"}, 3600),
        ({"version": "1.0", "aud": CLIENT_ID}, 3600),
        ({"version": "2.0"}, -30),
    ],
    ids=["v2", "v1", "v2-app-id-uri", "v1-client-id", "expired-within-the-leeway"],
)
def test_both_token_versions_and_both_audience_forms_are_accepted(
    api: Api, local_entra: LocalEntra, claims: dict[str, Any], expires_in: int
) -> None:
    token = local_entra.token(local_entra.claims(FLOW, exp=int(time.time()) + expires_in, **claims))

    reply = api.call("check_and_claim", CLAIM, headers=bearer_header(token))

    assert (reply.status, reply.body["decision"]) == (200, "proceed")


def test_a_new_signing_key_is_fetched_when_a_token_names_it(
    api: Api, local_entra: LocalEntra, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bearer, "REFRESH_COOLDOWN_SECONDS", 0.0)
    assert api.call("check_and_claim", CLAIM, headers=flow(local_entra)).status == 200
    assert (
        api.call("lookup_claim", {"scope": CLAIM["scope"], "key": CLAIM["key"]}, headers=flow(local_entra)).status
        == 200
    )
    assert local_entra.jwks_fetches == 1  # the keys are cached

    local_entra.publish("key-2")
    rolled = local_entra.token(local_entra.claims(FLOW), kid="key-2")
    reply = api.call("check_and_claim", {**CLAIM, "key": "ORDER-4"}, headers=bearer_header(rolled))

    assert (reply.status, reply.body["decision"]) == (200, "proceed")
    assert local_entra.jwks_fetches == 2
    assert api.call("check_and_claim", {**CLAIM, "key": "ORDER-5"}, headers=flow(local_entra)).status == 200


def test_tokens_naming_unknown_keys_do_not_each_fetch_the_keys_again(api: Api, local_entra: LocalEntra) -> None:
    assert api.call("check_and_claim", CLAIM, headers=flow(local_entra)).status == 200
    forged_key = new_key()

    replies = [
        api.call(
            "check_and_claim",
            CLAIM,
            headers=bearer_header(local_entra.token(local_entra.claims(FLOW), kid=f"k{n}", key=forged_key)),
        )
        for n in range(10)
    ]

    assert {reply.status for reply in replies} == {401}
    assert local_entra.jwks_fetches == 1  # within the cooldown, no forced refresh at all


def test_when_the_tenant_cannot_be_reached_the_answer_is_503_and_nothing_changes(
    api: Api, local_entra: LocalEntra, tmp_path: Path
) -> None:
    headers = flow(local_entra)
    before = stored(tmp_path)
    local_entra.stop()

    reply = api.call("check_and_claim", CLAIM, headers=headers)

    assert (reply.status, reply.code) == (503, "signin_unavailable")
    assert "retry-after" in reply.headers
    assert stored(tmp_path) == before


def test_without_a_person_the_reviewer_recorded_is_the_calling_application(api: Api, local_entra: LocalEntra) -> None:
    headers = bearer_header(local_entra.token(local_entra.claims(REVIEWER)))  # v2, application: azp, no name
    conflict_id = open_conflict(api, headers)

    resolved = api.call("resolve_conflict", {"decision": "dismiss"}, route={"conflictId": conflict_id}, headers=headers)

    assert resolved.body["resolution"]["reviewer"] == FLOW_APP_ID


def test_a_live_claim_goes_back_only_to_the_caller_it_was_granted_to(api: Api, local_entra: LocalEntra) -> None:
    # Run id and flow can be read from the processing record by anyone allowed to read claims (issue 9):
    # the same body from another signed-in caller is another run.
    body = {
        "scope": "erp.create-order",
        "key": "SO-signed",
        "runId": "08585-run",
        "flow": {"name": "Create ERP order", "environment": "Default-contoso"},
        "payload": {"amount": 10},
    }
    holder = flow(local_entra, azp="app-of-the-holder", oid="app-of-the-holder")
    other = flow(local_entra, azp="app-of-another", oid="app-of-another")

    first = api.call("check_and_claim", body, headers=holder)
    by_other = api.call("check_and_claim", body, headers=other)
    again = api.call("check_and_claim", body, headers=holder)

    assert (first.status, first.body["decision"]) == (200, "proceed")
    assert (by_other.body["decision"], by_other.body.get("claimToken")) == ("in_progress", None)
    assert (again.body["decision"], again.body["claimToken"]) == ("proceed", first.body["claimToken"])


def test_a_poll_address_goes_back_only_to_the_caller_it_was_handed_to(api: Api, local_entra: LocalEntra) -> None:
    # A poll may grant the claim: another signed-in caller who came by the address (a run's history shows it) must
    # get neither the grant nor the holder's answer.
    body = {
        "scope": "erp.create-order",
        "key": "SO-polled",
        "runId": "08585-run",
        "flow": {"name": "Create ERP order", "environment": "Default-contoso"},
        "payload": {"amount": 10},
    }
    holder, waiter, other = (flow(local_entra, azp=app, oid=app) for app in ("app-holder", "app-waiter", "app-other"))
    assert api.call("check_and_claim", body, headers=holder).body["decision"] == "proceed"
    asked = api.call("check_and_claim", {**body, "runId": "08586-run", "wait": True}, headers=waiter)
    parts = urlsplit(asked.headers["location"])
    route, params = {"claimId": parts.path.split("/")[-2]}, dict(parse_qsl(parts.query))

    by_other = api.call("wait_for_claim", route=route, params=params, headers=other)
    by_key = api.call("wait_for_claim", route=route, params=params)
    by_waiter = api.call("wait_for_claim", route=route, params=params, headers=waiter)

    assert asked.status == 202
    assert (by_other.status, by_other.code, by_other.targets) == (400, "invalid_request", ["ticket"])
    assert by_key.status == 401
    assert (by_waiter.status, by_waiter.body["decision"]) == (202, "in_progress")
