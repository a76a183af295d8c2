"""What every store must do with declared targets (issue 34), mixed into each store's test class beside
:class:`~tests.stores.contract.StoreContract`, with the same ``make_store`` fixture."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from oncegate.domain.targets import Target, TargetAuth
from oncegate.errors import ConcurrentUpdate, NotFound, StoreRace
from oncegate.stores.port import ClaimStore
from tests.stores.contract import RACERS, race
from tests.support.records import T0


def full_target(name: str = "erp") -> Target:
    """A target with every field set, none at its default."""
    return Target(
        name=name,
        base_url="https://erp.example.com/api",
        timeout_seconds=45,
        lookup_path="/orders?reference={reference}",
        auth=TargetAuth.SECRET,
        auth_value="X-Api-Key=oncegate-target-erp",
        allow_cidrs=("10.20.0.0/16", "fd00:1::/64"),
        honours_idempotency_key=True,
        success_statuses=(200, 201),
        retryable_statuses=(409, 423),
        record_pointer="/id",
        kept_headers=("Location", "X-Order-Id"),
        kept_pointers=("/id", "/status"),
        declared_by="ops@contoso.example",
        declared_at=T0,
    )


class TargetContract:
    """Tests every ``TargetRecords`` adapter must pass."""

    @pytest.fixture
    def targets(self, make_store: Callable[[], ClaimStore]) -> ClaimStore:
        return make_store()

    @pytest.mark.parametrize("build", [full_target, lambda: Target(name="min", base_url="https://m.example")])
    def test_a_saved_target_round_trips_every_field(
        self, targets: ClaimStore, make_store: Callable[[], ClaimStore], build: Callable[[], Target]
    ) -> None:
        target = build()

        saved = targets.save_target(target)

        assert saved.version is not None
        assert make_store().get_target(target.name) == saved
        assert replace(saved, version=None) == target

    def test_targets_list_in_name_order(self, targets: ClaimStore) -> None:
        for name in ("ticketing", "erp", "mail"):
            targets.save_target(full_target(name))

        assert [target.name for target in targets.list_targets()] == ["erp", "mail", "ticketing"]

    def test_no_targets_list_empty(self, targets: ClaimStore) -> None:
        assert targets.list_targets() == []

    def test_an_unknown_target_is_not_found(self, targets: ClaimStore) -> None:
        with pytest.raises(NotFound) as raised:
            targets.get_target("erp")
        assert raised.value.record == "target"

    def test_a_second_insert_of_a_name_changes_nothing(self, targets: ClaimStore) -> None:
        first = targets.save_target(full_target())

        with pytest.raises(ConcurrentUpdate):
            targets.save_target(replace(full_target(), base_url="https://elsewhere.example"))
        assert targets.get_target("erp") == first

    def test_a_replace_at_a_stale_version_changes_nothing(self, targets: ClaimStore) -> None:
        first = targets.save_target(full_target())
        second = targets.save_target(replace(first, timeout_seconds=10))

        with pytest.raises(ConcurrentUpdate):
            targets.save_target(replace(first, timeout_seconds=20))
        assert targets.get_target("erp") == second

    def test_concurrent_replaces_from_one_version_have_exactly_one_winner(
        self, make_store: Callable[[], ClaimStore]
    ) -> None:
        first = make_store().save_target(full_target())
        stores = [make_store() for _ in range(RACERS)]

        results = race(lambda i: stores[i].save_target(replace(first, timeout_seconds=i + 1)))

        winners = [result for result in results if not isinstance(result, StoreRace)]
        assert len(winners) == 1
        assert stores[0].get_target("erp") == winners[0]

    def test_delete_says_whether_there_was_a_target(self, targets: ClaimStore) -> None:
        targets.save_target(full_target())

        assert targets.delete_target("erp") is True
        assert targets.delete_target("erp") is False
        assert targets.list_targets() == []

    def test_a_deleted_target_can_be_declared_again(self, targets: ClaimStore) -> None:
        targets.save_target(full_target())
        targets.delete_target("erp")

        assert targets.save_target(full_target()).version is not None
