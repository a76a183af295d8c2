"""What a new process loads before its first answer (issue 36): only what that answer needs.

A new process imports ``function_app`` and answers a Check and claim on SQLite in function-key mode, as
a cold start on Azure does. PyJWT and cryptography serve Entra ID mode alone, phonenumbers only a value
holding a candidate phone number, the adapter that calls targets and the Azure credential only Perform once,
and a wire model no request has used yet is not built. Pydantic's plugins are not looked for: that reads
the metadata of every installed distribution.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from pydantic.alias_generators import to_camel

ROOT = Path(__file__).resolve().parents[2]

FIRST_CLAIM = """
import gc, json, re, sys
import azure.functions as func
{before}
import function_app
from pydantic.plugin import _loader

imported = sorted(sys.modules)
operation = sys.modules["oncegate.entrypoints.operations.table"].Operation
collector = {{"enabled": gc.isenabled(), "walks_the_table": any(one is operation for one in gc.get_objects())}}
functions = {{f.get_function_name(): f.get_user_function() for f in function_app.app.get_functions()}}
request = func.HttpRequest("POST", "http://localhost/api/claims", body={body!r},
                           headers={{"Content-Type": "application/json"}})
response = functions["check_and_claim"](request)
collector["walks_the_entry"] = any(isinstance(one, operation) for one in gc.get_objects())
modules = sorted(sys.modules)
built = {{name for module in modules if module.startswith("oncegate.models.")
         for name, model in vars(sys.modules[module]).items() if getattr(model, "__pydantic_complete__", False)}}
waiting = sys.modules["oncegate.domain.copies"]._init_when_called(object, []).__code__
records = {{f"{{module}}.{{name}}": vars(value)["__init__"].__code__ is not waiting
           for module in modules if module.startswith("oncegate.") for name, value in vars(sys.modules[module]).items()
           if isinstance(value, type) and value.__module__ == module and "__dataclass_fields__" in vars(value)
           and "__init__" in vars(value)}}
collector["after_the_claim"] = gc.isenabled()
compiled = sorted({{key[1] for key in re._cache if isinstance(key[1], str)}})
tables = {{"card_prefixes": sys.modules["oncegate.domain.sensitive"].card_prefixes.cache_info().currsize}}
print(json.dumps({{"status": response.status_code, "answer": json.loads(response.get_body()),
                  "imported": imported, "modules": modules, "built": sorted(built), "records": records,
                  "plugins_looked_for": _loader._plugins is not None, "collector": collector,
                  "compiled": compiled, "tables": tables}}))
"""
# What the first Check and claim never needs: the other actions' entries, models and services, the timers, the
# command line. Each is imported when its own action (or timer, or command) is first called.
OTHER_ACTIONS = {
    *(f"oncegate.entrypoints.operations.{name}" for name in ("bulk", "perform", "conflicts", "inventory", "targets")),
    *(f"oncegate.models.{name}" for name in ("bulk", "perform", "conflicts", "inventory", "targets", "health")),
    # The poll of Check and claim's wait: a first Check and claim never polls.
    "oncegate.models.claim_waits",
    *(f"oncegate.service.{name}" for name in ("attention", "bulk", "new_claims", "perform", "targets", "key_secrets")),
    # Record result, Release, Heartbeat and the reviews: their service, and the transitions after a claim.
    "oncegate.service.results",
    "oncegate.domain.transitions",
    # The other actions' commands: a claim is parsed into its intent, and the services read theirs only as types.
    *(f"oncegate.service.commands.{name}" for name in ("results", "conflicts", "registry", "perform")),
    "oncegate.entrypoints.timers",
    "oncegate.entrypoints.bearer",
    "oncegate.entrypoints.target_views",
    "oncegate.domain.performing",
    "oncegate.domain.target_declarations",
    # Perform once's targets, as records and as rows: the store a claim opens reads them only when asked for one.
    "oncegate.domain.targets",
    "oncegate.stores.target_rows",
    "oncegate.cli",
}

# What no claim answered needs: the purge after retention (a timer's), the store's export and restore (the command
# line's, and health's notice of a restore, with their records), the error body and the error table (the first
# refusal's), the routes of the catch-all (a path no action serves), a list's page (the lists'), the key-secret
# file (which stands in for ONCEGATE_KEY_SECRET on SQLite alone, and the test sets it).
NOT_FOR_AN_ANSWER = {
    # The compiled __init__ of the records of the modules the app leaves to their first use (tools/records.py).
    "oncegate.local_secret",
    "oncegate.entrypoints.error_map",
    "oncegate.models.paging",
    "oncegate.service.retention",
    "oncegate.service.backups",
    "oncegate.stores.export_format",
    "oncegate.domain.backups",
    "oncegate.entrypoints.routes",
    "oncegate.models.health",
}
# Every module of OnceGate a first Check and claim may import, up to its answer: one added to the path of a cold
# claim is added here on purpose, with what it costs every new process in mind (issue 36's cold start).
COLD_CLAIM = {
    "oncegate",
    "oncegate.bootstrap",
    "oncegate.bounded",
    "oncegate.config",
    "oncegate.cursors",
    "oncegate.domain",
    "oncegate.domain.copies",
    "oncegate.domain.decisions",
    "oncegate.domain.fingerprint_rules",
    "oncegate.domain.key_patterns",
    "oncegate.domain.keys",
    "oncegate.domain.limits",
    "oncegate.domain.marks",
    "oncegate.domain.members",
    "oncegate.domain.record_inits",
    "oncegate.domain.records",
    "oncegate.domain.safeguard",
    "oncegate.domain.sensitive",
    "oncegate.domain.statuses",
    "oncegate.domain.store_id",
    "oncegate.domain.times",
    "oncegate.domain.tombstones",
    "oncegate.domain.waiting",
    "oncegate.domain.warnings",
    "oncegate.entrypoints",
    "oncegate.entrypoints.http",
    "oncegate.entrypoints.logs",
    "oncegate.entrypoints.operations",
    "oncegate.entrypoints.operations.claims",
    "oncegate.entrypoints.operations.functions",
    "oncegate.entrypoints.operations.table",
    "oncegate.entrypoints.parse",
    "oncegate.entrypoints.principal",
    "oncegate.entrypoints.waits",
    "oncegate.errors",
    "oncegate.models",
    "oncegate.models.base",
    "oncegate.models.claim_requests",
    "oncegate.service",
    "oncegate.service.claims",
    "oncegate.service.commands",
    "oncegate.service.conflicts",
    "oncegate.service.core",
    "oncegate.service.inventory",
    "oncegate.service.safeguard",
    "oncegate.service.usage",
    "oncegate.service.waits",
    "oncegate.stores",
    "oncegate.stores.paging",
    "oncegate.stores.port",
    "oncegate.stores.row_reading",
    "oncegate.stores.row_writing",
    "oncegate.stores.sqlite",
    "oncegate.stores.sqlite_backups",
    "oncegate.stores.sqlite_batch",
    "oncegate.stores.sqlite_locks",
    "oncegate.stores.sqlite_rows",
    "oncegate.stores.sqlite_schema",
    "oncegate.stores.sqlite_targets",
    "oncegate.telemetry",
}


def _first_claim(tmp_path: Path, key: str, *, before: str = "", payload: Any = None, **settings: str) -> Any:
    environment = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("ONCEGATE_") and name != "PYDANTIC_DISABLE_PLUGINS"
    }
    environment |= settings
    environment |= {"ONCEGATE_SQLITE_PATH": str(tmp_path / "cold.db"), "ONCEGATE_KEY_SECRET": "cold-" + "s" * 40}
    flow = {"name": "Create order", "environment": "Default"}
    body = {"scope": "orders", "key": key, "payload": payload or {"order": 1001}, "runId": "run-1", "flow": flow}
    code = FIRST_CLAIM.format(body=json.dumps(body).encode(), before=before)
    done = subprocess.run([sys.executable, "-c", code], env=environment, cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_a_first_claim_in_key_mode_loads_no_token_library_and_no_phone_plans(tmp_path: Path) -> None:
    result = _first_claim(tmp_path, "SO-1001")
    assert result["status"] == 200
    assert result["answer"]["decision"] == "proceed"
    modules = set(result["modules"])
    assert not {"jwt", "cryptography", "phonenumbers"} & modules
    # Perform once's own: the adapter that calls a target (TLS, the secrets) and the credential it gets tokens with.
    assert not {"oncegate.outbound", "oncegate.outbound.targets_http", "azure.identity"} & modules
    assert result["plugins_looked_for"] is False
    built = set(result["built"])
    # The first request built its own request; its answer is written as the members ClaimResponse declares, which
    # no request makes (issue 32): that model waits too, as the models of the other actions wait for theirs.
    assert "ClaimRequest" in built
    assert not {"ClaimResponse", "ConflictView", "ResolveConflictRequest", "ClaimManyRequest", "FlowView"} & built


def test_a_first_claim_imports_nothing_of_the_other_actions(tmp_path: Path) -> None:
    # The app declares every function from the list written from the table, and imports an entry's module (its
    # models, its service) when the entry is first called: a cold start pays for what its first claim runs.
    result = _first_claim(tmp_path, "SO-1002")
    assert result["answer"]["decision"] == "proceed"
    assert OTHER_ACTIONS & set(result["modules"]) == set()
    # The claim's own entry is read at its first call, not with the app.
    assert "oncegate.entrypoints.operations.claims" not in result["imported"]
    assert "oncegate.entrypoints.operations.claims" in result["modules"]


def test_a_first_claim_imports_only_the_modules_of_its_path(tmp_path: Path) -> None:
    result = _first_claim(tmp_path, "SO-1003")
    assert result["answer"]["decision"] == "proceed"
    imported = {module for module in result["modules"] if module.split(".")[0] == "oncegate"}
    assert NOT_FOR_AN_ANSWER & imported == set()
    assert imported - COLD_CLAIM == set()


def test_a_first_claim_imports_no_model_module_it_never_uses(tmp_path: Path) -> None:
    # Its answer is written as the members ClaimResponse declares, and its entry names that model rather than
    # importing it: the connector, the command's client and an answer without HTTP import it when they read it.
    result = _first_claim(tmp_path, "SO-1011")
    assert result["answer"]["decision"] == "proceed"
    models = {module for module in result["modules"] if module.startswith("oncegate.models")}
    assert models == {"oncegate.models", "oncegate.models.base", "oncegate.models.claim_requests"}


def test_every_entry_reads_its_response_as_a_model() -> None:
    # An entry names its response model or gives it: either way the table's readers get the model itself.
    from oncegate import models
    from oncegate.entrypoints.operations import BY_NAME

    named = {operation.name for operation in BY_NAME.values() if isinstance(operation.response, str)}
    assert {"check_and_claim", "wait_for_claim"} <= named
    assert BY_NAME["check_and_claim"].response_model is models.ClaimResponse
    assert all(issubclass(operation.response_model, BaseModel) for operation in BY_NAME.values())


def test_a_first_claim_with_a_plain_payload_loads_no_canonical_json_library(tmp_path: Path) -> None:
    # The standard library's C encoder writes a plain payload as RFC 8785 does (oncegate.domain.keys.canonical):
    # rfc8785 is imported with the first value it must write, not with the app.
    result = _first_claim(tmp_path, "SO-1007")
    assert result["answer"]["decision"] == "proceed"
    assert "rfc8785" not in set(result["modules"])


def test_a_first_claim_whose_payload_needs_the_library_still_gets_its_fingerprint(tmp_path: Path) -> None:
    # 1e-07 is written with an exponent, which only the library writes as RFC 8785 has it; 2**60 is beyond JSON's
    # doubles, refused with the library's own error.
    written = _first_claim(tmp_path, "SO-1008", payload={"amount": 1e-07})
    assert written["answer"]["decision"] == "proceed"
    assert "rfc8785" in set(written["modules"])
    refused = _first_claim(tmp_path, "SO-1009", payload={"amount": 2**60})
    assert refused["status"] == 400
    assert "beyond" in refused["answer"]["error"]["message"]


def test_a_first_claim_compiles_no_pattern_it_never_matches(tmp_path: Path) -> None:
    # A pattern compiled at import is paid by every new process: those a first claim matches nothing with (a store
    # id, an Entra ID tenant, a source, a rule's pointer, a record's ClassVar, a route's ids) are compiled where first
    # matched. Those a plain claim's checks can pass by without (an OData annotation among the payload's names, a \u
    # escape in the body, the table prefix every start checks) are compiled only when they must tell.
    from oncegate import config
    from oncegate.domain import copies, fingerprint_rules, keys
    from oncegate.entrypoints import parse

    result = _first_claim(tmp_path, "SO-1010")
    assert result["answer"]["decision"] == "proceed"
    compiled = set(result["compiled"])
    assert keys.SCOPE_PATTERN.pattern in compiled  # matched: the scope of every claim
    unmatched = (
        config.STORE_ID_PATTERN,
        config.TENANT_PATTERN,
        config.TABLE_PREFIX_PATTERN,
        keys.SOURCE_PATTERN,
        keys._ANNOTATION,
        parse.SURROGATE_ESCAPE,
        fingerprint_rules._BAD_ESCAPE,
        copies._NO_FIELD,
        *parse.ROUTE_IDS.values(),  # a route's claim id or conflict id: Check and claim's route carries none
    )
    never = {getattr(pattern, "pattern", pattern) for pattern in unmatched}  # its text, compiled or not
    assert len(never) == len(unmatched)
    assert never & compiled == set()


def test_a_first_claim_writes_out_no_table_its_payload_never_reads(tmp_path: Path) -> None:
    # The card issuers' prefixes (some 600) are written out for the first number long enough to be a card's: a plain
    # key's first claim never makes them, and a key holding a card number is still refused on a first claim.
    plain = _first_claim(tmp_path, "SO-1012")
    assert plain["answer"]["decision"] == "proceed"
    assert plain["tables"] == {"card_prefixes": 0}
    card = _first_claim(tmp_path, "4111 1111 1111 1111")
    assert card["status"] == 400
    assert card["answer"]["error"]["code"] == "sensitive_key"
    assert card["tables"] == {"card_prefixes": 1}


def test_a_first_claim_compiles_the_init_of_only_the_records_it_makes(tmp_path: Path) -> None:
    # A frozen record's __init__ is compiled when its class is first called (oncegate.domain.copies.frozen): the
    # records a first claim never makes (a conflict, a wait, the attention list's) cost a new process nothing more.
    result = _first_claim(tmp_path, "SO-1006")
    assert result["answer"]["decision"] == "proceed"
    compiled = {name for name, done in result["records"].items() if done}
    assert {"oncegate.domain.records.Claim", "oncegate.domain.decisions.Intent"} <= compiled
    assert not {"oncegate.domain.records.Conflict", "oncegate.domain.waiting.Waiting"} & compiled
    assert "oncegate.domain.records.Conflict" in result["records"]


def test_the_collector_leaves_the_app_s_modules_out_and_runs_again_once_they_are_imported(tmp_path: Path) -> None:
    # Importing the app makes nothing that is garbage: the collector waits for the imports, then never walks what
    # they made (gc.freeze), and collects again for the requests. So with the entry a first call imports: its
    # module's entries, and the models it builds for them, are left out too.
    result = _first_claim(tmp_path, "SO-1004")
    assert result["answer"]["decision"] == "proceed"
    assert result["collector"] == {
        "enabled": True,
        "walks_the_table": False,
        "walks_the_entry": False,
        "after_the_claim": True,
    }


def test_a_host_that_turned_the_collector_off_finds_it_off_after_the_app_is_imported(tmp_path: Path) -> None:
    result = _first_claim(tmp_path, "SO-1005", before="gc.disable()")
    assert result["answer"]["decision"] == "proceed"
    assert result["collector"]["enabled"] is False
    assert result["collector"]["after_the_claim"] is False  # nor does a first call, which imports its entry paused


def test_a_first_request_refused_still_answers_the_contract_s_error(tmp_path: Path) -> None:
    # The error body's models come with the first refusal: a first request that is refused answers as any other.
    result = _first_claim(tmp_path, "")
    assert result["status"] == 400
    assert result["answer"]["error"]["code"] == "invalid_request"
    assert "oncegate.models.health" in set(result["modules"])


def test_a_key_holding_a_phone_number_is_still_refused_on_a_first_claim(tmp_path: Path) -> None:
    # phonenumbers is loaded where a candidate number is checked: the first request holding one still meets it.
    result = _first_claim(tmp_path, "+44 20 7946 0958")
    assert result["status"] == 400
    assert result["answer"]["error"]["code"] == "sensitive_key"
    assert "phonenumbers" in set(result["modules"])


def test_an_app_that_names_pydantic_plugins_still_has_them_looked_for(tmp_path: Path) -> None:
    # The app turns the search off only where nobody set PYDANTIC_DISABLE_PLUGINS: empty, every plugin is loaded.
    result = _first_claim(tmp_path, "SO-1002", PYDANTIC_DISABLE_PLUGINS="")
    assert result["status"] == 200
    assert result["plugins_looked_for"] is True


def _models(model: type[BaseModel]) -> list[type[BaseModel]]:
    return [model, *(below for sub in model.__subclasses__() for below in _models(sub))]


def test_every_field_keeps_the_wire_name_pydantic_gave_it() -> None:
    # The models name their fields with a quicker function than pydantic's to_camel: the same names on the wire.
    from oncegate import models
    from oncegate.entrypoints.operations import OPERATIONS
    from oncegate.models.base import _Model, wire_name

    assert OPERATIONS  # the bulk calls' item models are made with their entries
    assert all(getattr(models, name) is not None for name in models.__all__)  # every module of models imported

    names = {name for model in _models(_Model) for name in model.model_fields}
    assert len(names) > 100
    assert {name: wire_name(name) for name in names} == {name: to_camel(name) for name in names}


def test_the_models_annotations_are_objects_not_text() -> None:
    # Text annotations would have pydantic evaluate each field's annotation when its class is made, at every start.
    models = (ROOT / "oncegate" / "models").glob("*.py")
    postponed = [path.name for path in models if re.search(r"^from __future__ ", path.read_text(), re.MULTILINE)]
    assert postponed == []


def test_the_models_package_finds_every_name_it_exports_and_exports_every_name_it_finds() -> None:
    # oncegate.models names each export three times (the type checker's imports, __all__, and the module each is
    # loaded from on first use): a name added to one list and not the others would be missing at run time.
    from oncegate import models

    assert sorted(models._HOME) == sorted(models.__all__)
    for name, module in models._HOME.items():
        assert name in vars(__import__(module, fromlist=[name])), f"{name} is not in {module}"


@pytest.mark.parametrize(
    "prefix",
    [
        *("OnceGate", "A", "a1", "A" * 50, "A" * 51, "", "1abc", "Once-Gate", "Once Gate"),
        *("\u00dcnce", "Once\u00b2", "Once\u0661", "\ufb01x"),  # a letter and digits outside ASCII, a ligature
    ],
)
def test_the_table_prefix_check_every_start_runs_decides_as_its_pattern(prefix: str) -> None:
    # The check stands in for TABLE_PREFIX_PATTERN, which a new process no longer compiles: the same answer for
    # letters and digits outside ASCII (which str's own methods take for letters and digits) and at 50 characters.
    from oncegate import config

    assert config._is_table_prefix(prefix) is bool(re.fullmatch(config.TABLE_PREFIX_PATTERN, prefix))


@pytest.mark.parametrize(
    "given",
    [
        {"summary": "Run ID", "description": "The run.", "visibility": "advanced"},
        {"summary": "Status", "description": "Which.", "null": ("all", "All")},
        {"summary": "Flow", "description": "The flow.", "parts": {"name": ("Flow Name", "Its name.")}},
    ],
)
def test_a_field_s_designer_text_is_the_field_info_pydantic_s_field_makes(given: dict[str, Any]) -> None:
    # designer() makes its FieldInfo without Field(): the same object, every attribute and what was set alike.
    from pydantic import Field
    from pydantic.fields import FieldInfo

    from oncegate.models.base import designer

    made = designer(**given)
    field = Field(description=made.description, json_schema_extra=made.json_schema_extra)
    assert {name: getattr(made, name) for name in FieldInfo.__slots__} == {
        name: getattr(field, name) for name in FieldInfo.__slots__
    }
    assert repr(made) == repr(field)
