"""Declaring a target: every field checked before anything is stored, each refusal naming its field (issue 34)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from oncegate.domain.target_declarations import Declaration, auth_text, declare_target, lookup_path, secret_setting
from oncegate.domain.targets import TargetAuth
from oncegate.errors import InvalidRequest

ERP = Declaration(name="erp", base_url="https://erp.example.com/api/")


def declared(**changes: Any) -> Any:
    return declare_target(replace(ERP, **changes))


def refused_field(allow_loopback: bool = False, **changes: Any) -> str | None:
    with pytest.raises(InvalidRequest) as raised:
        declare_target(replace(ERP, **changes), allow_loopback=allow_loopback)
    return raised.value.target


def test_a_plain_declaration_takes_the_defaults() -> None:
    target = declared()

    assert target.base_url == "https://erp.example.com/api"
    assert (target.timeout_seconds, target.auth, target.auth_value, target.lookup_path) == (
        30,
        TargetAuth.NONE,
        None,
        None,
    )


@pytest.mark.parametrize("name", ["", "ERP", "erp_1", "-erp", "erp-", "e" * 64, "erp/1", "erp.example"])
def test_a_name_is_a_lower_case_label(name: str) -> None:
    assert refused_field(name=name) == "name"


@pytest.mark.parametrize(
    "url",
    [
        "http://erp.example.com",
        "ftp://erp.example.com",
        "erp.example.com",
        "https://user:pw@erp.example.com",
        "https://erp.example.com@evil.example",
        "https://erp.example.com/api?x=1",
        "https://erp.example.com/api#x",
        "https://erp.example.com/a/../b",
        "https://erp.example.com/a//b",
        "https://erp.example.com/%2e%2e",
        "https://erp.example.com\\@evil.example",
        "https://10.0.0.1",
        "https://169.254.169.254",
        "https://168.63.129.16",
        "https://[::ffff:10.0.0.1]",
        "https://[64:ff9b::a00:1]",
        "https://2130706433",
        "https://0x7f.1",
        "https://0177.0.0.1",
        "https://127.0.0.1",
        "https://localhost:8443",
        "https://erp.example.com:99999",
        "https://erp.example.com:0",
        "https://erp_example.com",
        "https://ërp.example.com",
    ],
)
def test_a_base_url_oncegate_may_not_call_is_refused(url: str) -> None:
    assert refused_field(base_url=url) == "baseUrl"


def test_plain_http_only_on_loopback_with_the_operator_setting() -> None:
    loopback = replace(ERP, base_url="http://127.0.0.1:8080/api")

    assert declare_target(loopback, allow_loopback=True).base_url == "http://127.0.0.1:8080/api"
    assert declare_target(replace(loopback, base_url="http://localhost:8080"), allow_loopback=True)
    assert refused_field(base_url="http://127.0.0.1:8080") == "baseUrl"
    assert refused_field(allow_loopback=True, base_url="http://erp.example.com") == "baseUrl"
    assert refused_field(allow_loopback=True, base_url="http://10.0.0.1") == "baseUrl"


def test_a_private_address_needs_a_declared_cidr() -> None:
    assert refused_field(base_url="https://10.20.1.5") == "baseUrl"
    assert declared(base_url="https://10.20.1.5", allow_cidrs=("10.20.0.0/16",)).allow_cidrs == ("10.20.0.0/16",)


@pytest.mark.parametrize(
    "cidr", ["0.0.0.0/0", "::/0", "169.254.0.0/16", "168.63.0.0/16", "127.0.0.0/8", "::ffff:0:0/96", "10.0.0.1/8", "x"]
)
def test_a_cidr_that_would_open_loopback_or_the_platform_is_refused(cidr: str) -> None:
    assert refused_field(allow_cidrs=(cidr,)) == "allowCidrs"


@pytest.mark.parametrize("seconds", [0, 91, -1, True])
def test_the_timeout_is_1_to_90_seconds(seconds: int) -> None:
    assert refused_field(timeout_seconds=seconds) == "timeoutSeconds"
    assert declared(timeout_seconds=1).timeout_seconds == 1
    assert declared(timeout_seconds=90).timeout_seconds == 90


@pytest.mark.parametrize("template", ["/orders?reference={reference}", "/orders/by-key/{idempotencyKey}"])
def test_a_look_up_names_the_record_by_a_placeholder_of_the_list(template: str) -> None:
    assert declared(lookup_path=template).lookup_path == template


@pytest.mark.parametrize(
    "template",
    ["/orders", "/orders/{claimId}", "/orders/{reference", "orders/{reference}", "/../{reference}", "//x/{reference}"],
)
def test_a_look_up_without_a_known_placeholder_or_escaping_is_refused(template: str) -> None:
    assert refused_field(lookup_path=template) == "lookupPath"


def test_a_look_up_path_encodes_each_value_whole() -> None:
    path = lookup_path("/orders?reference={reference}", {"reference": "PO 1/../&x=y"})

    assert path == "/orders?reference=PO%201%2F..%2F%26x%3Dy"


@pytest.mark.parametrize(
    ("auth", "kind", "value"),
    [
        ("none", TargetAuth.NONE, None),
        ("identity:api://erp", TargetAuth.IDENTITY, "api://erp"),
        ("secret:X-Api-Key=oncegate-target-erp", TargetAuth.SECRET, "X-Api-Key=oncegate-target-erp"),
        (
            "secret:Authorization=oncegate-target-erp-bearer",
            TargetAuth.SECRET,
            "Authorization=oncegate-target-erp-bearer",
        ),
    ],
)
def test_auth_names_a_secret_by_reference(auth: str, kind: TargetAuth, value: str | None) -> None:
    target = declared(auth=auth)

    assert (target.auth, target.auth_value, auth_text(target)) == (kind, value, auth)


@pytest.mark.parametrize(
    "auth",
    [
        "secret:X-Api-Key=oncegate-key-secret",
        "secret:X-Api-Key=oncegate-key-secret-previous",
        "secret:X-Api-Key=my-erp-secret",
        "secret:X-Api-Key=sk_live_abcdef",
        "secret:X-Api-Key=",
        "secret:Host=oncegate-target-erp",
        "secret:Content-Length=oncegate-target-erp",
        "secret:Idempotency-Key=oncegate-target-erp",
        "secret:Bad Header=oncegate-target-erp",
        "identity:",
        "basic:user:pw",
        "none:x",
    ],
)
def test_auth_that_is_a_secret_itself_or_the_key_secret_is_refused(auth: str) -> None:
    assert refused_field(auth=auth) == "auth"


def test_a_secret_is_read_from_a_setting_of_its_own_name() -> None:
    assert secret_setting("oncegate-target-erp-api") == "ONCEGATE_TARGET_SECRET_ERP_API"


@pytest.mark.parametrize(
    ("field", "changes"),
    [
        ("successStatuses", {"success_statuses": (302,)}),
        ("successStatuses", {"success_statuses": (199,)}),
        ("retryableStatuses", {"retryable_statuses": (500,)}),
        ("retryableStatuses", {"retryable_statuses": (200,)}),
        ("recordPointer", {"record_pointer": "id"}),
        ("recordPointer", {"record_pointer": "/a/~2"}),
        ("keptPointers", {"kept_pointers": ("/ok", "bad")}),
        ("keptHeaders", {"kept_headers": ("Set-Cookie",)}),
        ("keptHeaders", {"kept_headers": ("Bad Header",)}),
        ("keptHeaders", {"kept_headers": tuple(f"X-{n}" for n in range(21))}),
    ],
)
def test_statuses_pointers_and_kept_headers_are_checked(field: str, changes: dict[str, Any]) -> None:
    assert refused_field(**changes) == field


def test_every_field_kept_as_declared() -> None:
    target = declared(
        success_statuses=(201, 200, 201),
        retryable_statuses=(409,),
        record_pointer="/data/id",
        kept_headers=("Location",),
        kept_pointers=("/data/id", "/status"),
        honours_idempotency_key=True,
    )

    assert target.success_statuses == (200, 201)
    assert (target.record_pointer, target.kept_headers, target.kept_pointers) == (
        "/data/id",
        ("Location",),
        ("/data/id", "/status"),
    )
    assert target.honours_idempotency_key is True
