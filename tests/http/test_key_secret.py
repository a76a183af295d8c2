"""A service started with another key secret answers 503 naming the setting, on actions and health (issue 10)."""

from __future__ import annotations

from collections.abc import Callable

from oncegate import bootstrap
from oncegate.domain.keys import KeyHasher
from oncegate.stores.port import ClaimStore
from tests.conftest import FakeClock
from tests.gate import Gate
from tests.http.client import Api
from tests.http.test_actions import claim_body

OTHER = "another-secret-" + "z" * 32


def test_another_secret_is_a_503_naming_the_setting(
    api: Api, open_store: Callable[[], ClaimStore], clock: FakeClock
) -> None:
    assert api.call("check_and_claim", claim_body()).status == 200
    bootstrap.use_services(Gate(open_store(), KeyHasher(OTHER), clock=clock).services)

    claimed = api.call("check_and_claim", claim_body(run="run-2"))
    health = api.call("health")

    for reply in (claimed, health):
        assert reply.status == 503
        assert reply.body["error"]["code"] == "not_configured"
        assert reply.body["error"]["details"][0]["target"] == "ONCEGATE_KEY_SECRET"
        assert "ONCEGATE_KEY_SECRET" in reply.body["error"]["message"]
