"""The delete locks and what the docs ask of the people who deploy and operate (issue 35).

Two ways the locks trapped operators: the deployer roles docs/deploy.md listed could not create a lock,
so the first deployment would stop at it; and a ``CanNotDelete`` lock refuses deleting what is under
its resource, role assignments included (``ScopeLocked``), so the runbooks' own role removals failed.
Here the documented roles must grant every write the template makes with ``deleteLocks`` on and off,
and every documented ``az role assignment delete`` on a locked resource lifts its lock and puts it back.
"""

from __future__ import annotations

import re
import shlex
from fnmatch import fnmatchcase
from pathlib import Path

import pytest

from tests.infra.bicep import BicepFile, deploy_module, string_value

DEPLOY = Path(__file__).resolve().parents[2] / "docs" / "deploy.md"
# A fenced block, indented too (the runbooks' blocks sit inside list items).
FENCE = re.compile(r"^[ \t]*```[^\n`]*\n(?P<body>.*?)^[ \t]*```[ \t]*$", re.M | re.S)
DOCUMENTS = [DEPLOY, DEPLOY.with_name("operations.md")]

# Azure built-in roles (learn.microsoft.com/azure/role-based-access-control/built-in-roles/privileged):
# (actions, notActions), matched as Azure matches them, case-insensitively with * as a wildcard.
ROLES = {
    "Owner": (["*"], []),
    "Contributor": (
        ["*"],
        [
            "Microsoft.Authorization/*/Delete",
            "Microsoft.Authorization/*/Write",
            "Microsoft.Authorization/elevateAccess/Action",
            "Microsoft.Blueprint/blueprintAssignments/write",
            "Microsoft.Blueprint/blueprintAssignments/delete",
            "Microsoft.Compute/galleries/share/action",
            "Microsoft.Purview/consents/write",
            "Microsoft.Purview/consents/delete",
            "Microsoft.Resources/deploymentStacks/manageDenySetting/action",
        ],
    ),
    "User Access Administrator": (["*/read", "Microsoft.Authorization/*", "Microsoft.Support/*"], []),
    "Role Based Access Control Administrator": (
        [
            "Microsoft.Authorization/roleAssignments/write",
            "Microsoft.Authorization/roleAssignments/delete",
            "*/read",
            "Microsoft.Support/*",
        ],
        [],
    ),
}
LOCK_TYPE = "Microsoft.Authorization/locks"
# The lock on each locked resource, and how a command's --scope names that resource.
LOCKS = {
    "oncegate-keep-claims": ("core/storage/storage-account.bicep", re.compile(r"storage", re.I)),
    "oncegate-keep-key-secret": ("core/security/keyvault.bicep", re.compile(r"vault", re.I)),
}


def matches(pattern: str, action: str) -> bool:
    return fnmatchcase(action.lower(), pattern.lower())


def granted(roles: list[str], action: str) -> bool:
    """Whether any of the roles allows the action (a role's notActions take from its own actions only)."""
    for role in roles:
        actions, not_actions = ROLES[role]
        if any(matches(a, action) for a in actions) and not any(matches(n, action) for n in not_actions):
            return True
    return False


def writes(bicep_files: list[BicepFile], main: BicepFile, *, delete_locks: bool) -> set[str]:
    """The ``<type>/write`` actions a deployment makes: every resource it declares (not an existing one)."""
    found = {"Microsoft.Resources/deployments/write"}  # each module is a nested deployment
    locks = deploy_module(main, "storage", {"deleteLocks": delete_locks})
    assert locks is not None
    for file in bicep_files:
        for resource in file.declarations("resource"):
            kind = resource.declared_type.partition("@")[0]
            if resource.existing or (kind == LOCK_TYPE and not locks["deleteLock"]):
                continue
            found.add(f"{kind}/write")
    return found


def documented_roles() -> dict[bool, list[list[str]]]:
    """deploy.md's prerequisites table: for deleteLocks true and false, the sets of roles that may deploy."""
    text = DEPLOY.read_text(encoding="utf-8")
    rows = re.findall(r"^\s*\| `(true|false)`[^|]*\| ([^|]+) \|$", text, re.M)
    assert {value for value, _ in rows} == {"true", "false"}, "deploy.md's prerequisites table is missing"
    table: dict[bool, list[list[str]]] = {}
    for value, cell in rows:
        table[value == "true"] = [
            [role.strip() for role in alternative.split(" and ")] for alternative in re.split(r";\s*or\s+", cell)
        ]
    return table


@pytest.mark.parametrize("delete_locks", [True, False])
def test_the_documented_deployer_roles_can_make_everything_the_template_makes(
    delete_locks: bool, bicep_files: list[BicepFile], main_bicep: BicepFile
) -> None:
    needed = writes(bicep_files, main_bicep, delete_locks=delete_locks)
    assert (f"{LOCK_TYPE}/write" in needed) is delete_locks
    for roles in documented_roles()[delete_locks]:
        assert set(roles) <= ROLES.keys(), f"unknown role in deploy.md: {roles}"
        missing = sorted(action for action in needed if not granted(roles, action))
        assert missing == [], f"{' and '.join(roles)} cannot {missing} (deleteLocks {delete_locks})"


def test_contributor_with_the_rbac_role_cannot_place_a_lock() -> None:
    # Why the table has two lines: the least-privileged pair makes role assignments but no lock.
    pair = ["Contributor", "Role Based Access Control Administrator"]
    assert granted(pair, "Microsoft.Authorization/roleAssignments/write")
    assert not granted(pair, f"{LOCK_TYPE}/write")
    assert granted(["Contributor", "User Access Administrator"], f"{LOCK_TYPE}/write")
    assert [pair] not in documented_roles().values()
    assert pair in documented_roles()[False]


def test_the_locks_are_the_ones_the_docs_lift_and_restore(bicep: dict[str, BicepFile]) -> None:
    text = DEPLOY.read_text(encoding="utf-8")
    for name, (path, _) in LOCKS.items():
        (lock,) = [r for r in bicep[path].declarations("resource") if r.declared_type.startswith(LOCK_TYPE)]
        assert lock.get("name") is not None
        assert string_value(lock.get("name")) == name  # type: ignore[arg-type]
        notes = string_value(lock.get("properties", "notes"))  # type: ignore[arg-type]
        # Placed by hand, a lock reads as the deployment's own: the same name, level and notes.
        assert f"az lock create --name {name} --lock-type CanNotDelete" in text
        assert f'--notes "{notes}"' in text


def commands(block: str) -> list[str]:
    """The commands of a shell block, continuation lines joined, comments dropped."""
    joined = re.sub(r"\\\n\s*", " ", block)
    return [line.strip() for line in joined.splitlines() if line.strip() and not line.strip().startswith("#")]


def lock_of(command: str) -> str | None:
    words = shlex.split(command)
    scope = words[words.index("--scope") + 1] if "--scope" in words else ""
    found = [name for name, (_, names) in LOCKS.items() if names.search(scope)]
    assert len(found) <= 1, command
    return found[0] if found else None


def unguarded_deletes(text: str) -> list[str]:
    """Each ``az role assignment delete`` on a locked resource not between lifting its lock and restoring it."""
    problems = []
    blocks = [match.group("body") for match in FENCE.finditer(text)]
    for block in blocks:
        lines = commands(block)
        for index, line in enumerate(lines):
            if not line.startswith("az role assignment delete"):
                continue
            lock = lock_of(line)
            if lock is None:
                continue
            on_lock = [(n, c) for n, c in enumerate(lines) if c.startswith("az lock ") and f"--name {lock} " in c + " "]
            before = [c for n, c in on_lock if n < index]
            after = [c for n, c in on_lock if n > index]
            lifted = bool(before) and before[-1].startswith("az lock delete")
            if not (lifted and after and after[0].startswith("az lock create")):
                problems.append(line)
    # A removal written in prose has no lock commands around it at all.
    outside = FENCE.sub("", text)
    problems += [match.group(0) for match in re.finditer(r"`az role assignment delete[^`]*`", outside)]
    return problems


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: path.name)
def test_every_documented_role_removal_lifts_the_lock_and_puts_it_back(document: Path) -> None:
    assert unguarded_deletes(document.read_text(encoding="utf-8")) == []


def test_the_check_finds_a_removal_under_a_lock_left_on() -> None:
    scope = '--scope "$VAULT_ID"'
    bare = f"```sh\naz role assignment delete --assignee x --role r {scope}\n```\n"
    assert unguarded_deletes(bare) == [f"az role assignment delete --assignee x --role r {scope}"]
    lifted = (
        "```sh\naz lock delete --name oncegate-keep-key-secret --resource-group g\n"
        f"az role assignment delete --assignee x --role r {scope}\n"
        "az lock create --name oncegate-keep-key-secret --lock-type CanNotDelete --resource-group g\n```\n"
    )
    assert unguarded_deletes(lifted) == []
    # The other resource's lock does not count.
    assert unguarded_deletes(lifted.replace("oncegate-keep-key-secret", "oncegate-keep-claims")) != []
    assert unguarded_deletes("Remove it: `az role assignment delete --assignee x --scope <vault id>`.") != []
