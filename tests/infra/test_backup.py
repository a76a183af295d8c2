"""The claims' backup as docs/operations.md sets it up (*Scheduled exports*): the container's lifecycle rule.

Each export holds claims retention would have purged since, so deleting it is how they are purged, at
``expiresAt`` at the latest. The container keeps blob versions (and soft delete), and a deleted blob's
current version becomes a previous version that stays until it is deleted in turn (Microsoft's "Blob
versioning": "When you delete a blob, the current version of the blob becomes a previous version ... Any
previous versions of the blob persist"): a rule that deletes only base blobs keeps every export, and every
claim in it, for ever. The policy the runbook writes is checked here against Microsoft's type definitions of
``Microsoft.Storage/storageAccounts/managementPolicies`` (tests/infra/types), as the templates are.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from tests.infra.typecheck import TypeRef, Types, object_members

ROOT = Path(__file__).resolve().parents[2]
OPERATIONS = ROOT / "docs" / "operations.md"
POLICY_TYPE = "Microsoft.Storage/storageAccounts/managementPolicies@2023-05-01"
CONTAINER = "oncegate-exports"
HEREDOC = re.compile(r"cat > (?P<file>[\w.-]+\.json) <<'EOF'\n(?P<body>.*?)\nEOF\n", re.S)
REQUIRED, READ_ONLY = 1, 2


def section(title: str) -> str:
    text = OPERATIONS.read_text(encoding="utf-8")
    start = text.index(f"### {title}\n")
    return text[start : text.index("\n### ", start + 1)]


def runbook_policy() -> tuple[str, dict[str, Any]]:
    """The lifecycle policy the scheduled exports' runbook writes, and the command that applies it."""
    found = HEREDOC.search(section("Scheduled exports"))
    assert found is not None, "the runbook writes no lifecycle policy for the exports' container"
    return found["file"], json.loads(found["body"])


def problems(value: Any, ref: TypeRef, where: str) -> list[str]:
    """What in ``value`` Microsoft's type does not take: unknown, read-only or missing properties, wrong kinds."""
    kind = ref.kind
    if kind == "ObjectType":
        if not isinstance(value, dict):
            return [f"{where}: not an object"]
        members, _ = object_members(ref)
        found = [f"{where}.{name}: no such property" for name in value if name not in members]
        missing = [name for name, member in members.items() if member["flags"] & REQUIRED and name not in value]
        found += [f"{where}.{name}: required" for name in missing]
        for name, item in value.items():
            if name in members:
                if members[name]["flags"] & READ_ONLY:
                    found.append(f"{where}.{name}: read-only")
                found += problems(item, ref.ref(members[name]["type"]), f"{where}.{name}")
        return found
    if kind == "ArrayType":
        if not isinstance(value, list):
            return [f"{where}: not an array"]
        item_type = ref.ref(ref.entry["itemType"])
        return [found for i, item in enumerate(value) for found in problems(item, item_type, f"{where}[{i}]")]
    if kind == "UnionType":
        options = [ref.ref(element) for element in ref.entry["elements"]]
        fits = any(not problems(value, option, where) for option in options)
        return [] if fits else [f"{where}: {value!r} not allowed"]
    if kind == "StringLiteralType":
        return [] if value == ref.entry["value"] else [f"{where}: {value!r} is not {ref.entry['value']!r}"]
    if kind == "StringType":
        return [] if isinstance(value, str) else [f"{where}: not a string"]
    if kind == "IntegerType":
        low, high = ref.entry.get("minValue", -(2**63)), ref.entry.get("maxValue", 2**63)
        ok = isinstance(value, int) and not isinstance(value, bool) and low <= value <= high
        return [] if ok else [f"{where}: {value!r} is not an integer in [{low}, {high}]"]
    if kind == "BooleanType":
        return [] if isinstance(value, bool) else [f"{where}: not a boolean"]
    return []


def test_the_runbook_applies_the_policy_it_writes_to_the_backup_account() -> None:
    file, _ = runbook_policy()
    commands = " ".join(section("Scheduled exports").split())
    assert "az storage account management-policy create -g '<backup group>' --account-name '<backup account>' " in (
        commands
    )
    assert f"--policy @{file}" in commands


def test_the_policy_is_one_microsofts_types_take() -> None:
    _, policy = runbook_policy()
    body = Types().body(POLICY_TYPE)
    assert body is not None
    members, _ = object_members(body)
    properties = body.ref(members["properties"]["type"])
    assert problems({"policy": policy}, properties, "properties") == []
    # The check itself: a misspelt action and a version rule on the wrong field are caught.
    wrong = json.loads(json.dumps(policy).replace("daysAfterCreationGreaterThan", "daysAfterCreatedGreaterThan"))
    assert problems({"policy": wrong}, properties, "properties")


def test_an_export_deleted_by_age_leaves_no_version_behind() -> None:
    _, policy = runbook_policy()
    (rule,) = policy["rules"]
    assert rule["enabled"] is True
    filters, actions = rule["definition"]["filters"], rule["definition"]["actions"]
    assert filters["prefixMatch"] == [f"{CONTAINER}/"]
    assert filters["blobTypes"] == ["blockBlob"]
    base = actions["baseBlob"]["delete"]["daysAfterCreationGreaterThan"]
    # The export, and the previous version its deletion leaves (and any version an upload made), go by the
    # same age: a version's creation is its blob's write, so both are due the same day.
    assert actions["version"]["delete"]["daysAfterCreationGreaterThan"] == base
    assert actions.get("snapshot", {"delete": {"daysAfterCreationGreaterThan": base}})["delete"] == {
        "daysAfterCreationGreaterThan": base
    }
    # Kept in all for that age, plus the container's blob soft delete: the runbook says to count both.
    prose = " ".join(section("Scheduled exports").split())
    assert "--delete-retention-days 30" in prose
    assert "previous version" in prose
    assert "soft delete" in prose
