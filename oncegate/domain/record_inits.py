"""The ``__init__`` of every record, written by ``python -m tools.records`` from the records' fields: do not edit.

A record's ``__init__`` is made at its first call from a text (``oncegate.domain.copies``); the text of each is
here as code, by the shape it is made from, compiled with the package's bytecode, so that a new process reads it
rather than compiling it (issue 36's cold start). A shape missing here is compiled at the record's first call.
"""

# ruff: noqa
# mypy: ignore-errors
# fmt: off
# As copies compiles a text: its flags are its caller's, which names this.
from __future__ import annotations

from types import CodeType

INITS: dict[tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]], CodeType] = {}

def __init__(self, attempt, run_id, flow, status, started_at, lease_expires_at, error):
    self.__dict__.update(attempt=attempt, run_id=run_id, flow=flow, status=status, started_at=started_at, lease_expires_at=lease_expires_at, error=error)
INITS[(('attempt', 'run_id', 'flow', 'status', 'started_at', 'lease_expires_at', 'error'), (), ())] = __init__.__code__

def __init__(self, body, intent, warnings):
    self.__dict__.update(body=body, intent=intent, warnings=warnings)
INITS[(('body', 'intent', 'warnings'), (), ())] = __init__.__code__

def __init__(self, *, body, query, params, ids, caller, address, root, link, seal):
    self.__dict__.update(body=body, query=query, params=__factory_params__() if params is __made_by_factory__ else params, ids=__factory_ids__() if ids is __made_by_factory__ else ids, caller=caller, address=address, root=root, link=link, seal=seal)
INITS[(('body', 'query', 'params', 'ids', 'caller', 'address', 'root', 'link', 'seal'), ('body', 'query', 'params', 'ids', 'caller', 'address', 'root', 'link', 'seal'), ('params', 'ids'))] = __init__.__code__

def __init__(self, claim, events, fingerprints, changed_at):
    self.__dict__.update(claim=claim, events=events, fingerprints=fingerprints, changed_at=changed_at)
INITS[(('claim', 'events', 'fingerprints', 'changed_at'), (), ())] = __init__.__code__

def __init__(self, claim, why, since):
    self.__dict__.update(claim=claim, why=why, since=since)
INITS[(('claim', 'why', 'since'), (), ())] = __init__.__code__

def __init__(self, claim_id, event_id, at, kind, outcome, attempt, recognised_by, run_id, flow, fingerprint, source, details, count, last_at):
    self.__dict__.update(claim_id=claim_id, event_id=event_id, at=at, kind=kind, outcome=outcome, attempt=attempt, recognised_by=recognised_by, run_id=run_id, flow=flow, fingerprint=fingerprint, source=source, details=__factory_details__() if details is __made_by_factory__ else details, count=count, last_at=last_at)
INITS[(('claim_id', 'event_id', 'at', 'kind', 'outcome', 'attempt', 'recognised_by', 'run_id', 'flow', 'fingerprint', 'source', 'details', 'count', 'last_at'), (), ('details',))] = __init__.__code__

def __init__(self, claim_id, fingerprint, resolved, alias_generation, conflict_id, decision, reviewer, note, resolved_at, version):
    self.__dict__.update(claim_id=claim_id, fingerprint=fingerprint, resolved=resolved, alias_generation=alias_generation, conflict_id=conflict_id, decision=decision, reviewer=reviewer, note=note, resolved_at=resolved_at, version=version)
INITS[(('claim_id', 'fingerprint', 'resolved', 'alias_generation', 'conflict_id', 'decision', 'reviewer', 'note', 'resolved_at', 'version'), (), ())] = __init__.__code__

def __init__(self, claim_id, scope, status, attempt, fingerprint, grant_id, run_id, flow, first_received_at, last_attempt_at, updated_at, lease_expires_at, target_record_id, data, completed_at, error, retryable, reviewer, granted_to, source, reference, earlier_attempt, released_in_doubt, generation, key_id, rules_version, idempotency_attempt, members, purged_at, legacy_token, legacy_resolutions, version):
    self.__dict__.update(claim_id=claim_id, scope=scope, status=status, attempt=attempt, fingerprint=fingerprint, grant_id=grant_id, run_id=run_id, flow=flow, first_received_at=first_received_at, last_attempt_at=last_attempt_at, updated_at=updated_at, lease_expires_at=lease_expires_at, target_record_id=target_record_id, data=data, completed_at=completed_at, error=error, retryable=retryable, reviewer=reviewer, granted_to=granted_to, source=source, reference=reference, earlier_attempt=earlier_attempt, released_in_doubt=released_in_doubt, generation=generation, key_id=key_id, rules_version=rules_version, idempotency_attempt=idempotency_attempt, members=members, purged_at=purged_at, legacy_token=legacy_token, legacy_resolutions=legacy_resolutions, version=version)
INITS[(('claim_id', 'scope', 'status', 'attempt', 'fingerprint', 'grant_id', 'run_id', 'flow', 'first_received_at', 'last_attempt_at', 'updated_at', 'lease_expires_at', 'target_record_id', 'data', 'completed_at', 'error', 'retryable', 'reviewer', 'granted_to', 'source', 'reference', 'earlier_attempt', 'released_in_doubt', 'generation', 'key_id', 'rules_version', 'idempotency_attempt', 'members', 'purged_at', 'legacy_token', 'legacy_resolutions', 'version'), (), ())] = __init__.__code__

def __init__(self, claim_id, series, attempt, count, last_at):
    self.__dict__.update(claim_id=claim_id, series=series, attempt=attempt, count=count, last_at=last_at)
INITS[(('claim_id', 'series', 'attempt', 'count', 'last_at'), (), ())] = __init__.__code__

def __init__(self, *, claim_token, lease_seconds):
    self.__dict__.update(claim_token=claim_token, lease_seconds=lease_seconds)
INITS[(('claim_token', 'lease_seconds'), ('claim_token', 'lease_seconds'), ())] = __init__.__code__

def __init__(self, *, claim_token, reason):
    self.__dict__.update(claim_token=claim_token, reason=reason)
INITS[(('claim_token', 'reason'), ('claim_token', 'reason'), ())] = __init__.__code__

def __init__(self, *, claim_token, result):
    self.__dict__.update(claim_token=claim_token, result=result)
INITS[(('claim_token', 'result'), ('claim_token', 'result'), ())] = __init__.__code__

def __init__(self, claim_with, writes):
    self.__dict__.update(claim_with=claim_with, writes=writes)
INITS[(('claim_with', 'writes'), (), ())] = __init__.__code__

def __init__(self, claims, tombstones, held, last_horizon, retryable, unsettled, disputed):
    self.__dict__.update(claims=claims, tombstones=tombstones, held=held, last_horizon=last_horizon, retryable=retryable, unsettled=unsettled, disputed=disputed)
INITS[(('claims', 'tombstones', 'held', 'last_horizon', 'retryable', 'unsettled', 'disputed'), (), ())] = __init__.__code__

def __init__(self, claims, waits, conflicts, inventory, store, sensitive_data, cursor_seal, _later, store_location):
    self.__dict__.update(claims=claims, waits=waits, conflicts=conflicts, inventory=inventory, store=store, sensitive_data=sensitive_data, cursor_seal=cursor_seal, _later=_later, store_location=store_location)
INITS[(('claims', 'waits', 'conflicts', 'inventory', 'store', 'sensitive_data', 'cursor_seal', '_later', 'store_location'), (), ())] = __init__.__code__

def __init__(self, client, scope, flow, keys, numbers, source, held):
    self.__dict__.update(client=client, scope=scope, flow=flow, keys=keys, numbers=numbers, source=source, held=__factory_held__() if held is __made_by_factory__ else held)
INITS[(('client', 'scope', 'flow', 'keys', 'numbers', 'source', 'held'), (), ('held',))] = __init__.__code__

def __init__(self, conflict_id, claim_id, scope, status, origin, fingerprint, claim_fingerprint, reason, run_id, flow, created_at, details, source_system, changed, more_changed, decision, reviewer, note, resolved_at, version):
    self.__dict__.update(conflict_id=conflict_id, claim_id=claim_id, scope=scope, status=status, origin=origin, fingerprint=fingerprint, claim_fingerprint=claim_fingerprint, reason=reason, run_id=run_id, flow=flow, created_at=created_at, details=details, source_system=source_system, changed=changed, more_changed=more_changed, decision=decision, reviewer=reviewer, note=note, resolved_at=resolved_at, version=version)
INITS[(('conflict_id', 'claim_id', 'scope', 'status', 'origin', 'fingerprint', 'claim_fingerprint', 'reason', 'run_id', 'flow', 'created_at', 'details', 'source_system', 'changed', 'more_changed', 'decision', 'reviewer', 'note', 'resolved_at', 'version'), (), ())] = __init__.__code__

def __init__(self, conflict_id, fingerprint, decision):
    self.__dict__.update(conflict_id=conflict_id, fingerprint=fingerprint, decision=decision)
INITS[(('conflict_id', 'fingerprint', 'decision'), (), ())] = __init__.__code__

def __init__(self, count, oldest):
    self.__dict__.update(count=count, oldest=oldest)
INITS[(('count', 'oldest'), (), ())] = __init__.__code__

def __init__(self, current, previous, next):
    self.__dict__.update(current=current, previous=previous, next=next)
INITS[(('current', 'previous', 'next'), (), ())] = __init__.__code__

def __init__(self, *, decision, claim_id, status, attempt, reason, warnings, response, target_record_id, idempotency_key, claim_token, lease_expires_at, retry_after_seconds, retryable, conflict_id, earlier_attempt, looked_up, target_status, target_failure):
    self.__dict__.update(decision=decision, claim_id=claim_id, status=status, attempt=attempt, reason=reason, warnings=__factory_warnings__() if warnings is __made_by_factory__ else warnings, response=response, target_record_id=target_record_id, idempotency_key=idempotency_key, claim_token=claim_token, lease_expires_at=lease_expires_at, retry_after_seconds=retry_after_seconds, retryable=retryable, conflict_id=conflict_id, earlier_attempt=earlier_attempt, looked_up=looked_up, target_status=target_status, target_failure=target_failure)
INITS[(('decision', 'claim_id', 'status', 'attempt', 'reason', 'warnings', 'response', 'target_record_id', 'idempotency_key', 'claim_token', 'lease_expires_at', 'retry_after_seconds', 'retryable', 'conflict_id', 'earlier_attempt', 'looked_up', 'target_status', 'target_failure'), ('decision', 'claim_id', 'status', 'attempt', 'reason', 'warnings', 'response', 'target_record_id', 'idempotency_key', 'claim_token', 'lease_expires_at', 'retry_after_seconds', 'retryable', 'conflict_id', 'earlier_attempt', 'looked_up', 'target_status', 'target_failure'), ('warnings',))] = __init__.__code__

def __init__(self, decision, recognised_by, reason, change, *, earlier_attempt, retry_after_seconds, record, claim_id, status, attempt, warnings, claim_token, idempotency_key, lease_expires_at, holder, result, conflict_id, changed, more_changed, own_call):
    self.__dict__.update(decision=decision, recognised_by=recognised_by, reason=reason, change=change, earlier_attempt=earlier_attempt, retry_after_seconds=retry_after_seconds, record=record, claim_id=claim_id, status=status, attempt=attempt, warnings=__factory_warnings__() if warnings is __made_by_factory__ else warnings, claim_token=claim_token, idempotency_key=idempotency_key, lease_expires_at=lease_expires_at, holder=holder, result=result, conflict_id=conflict_id, changed=changed, more_changed=more_changed, own_call=own_call)
INITS[(('decision', 'recognised_by', 'reason', 'change', 'earlier_attempt', 'retry_after_seconds', 'record', 'claim_id', 'status', 'attempt', 'warnings', 'claim_token', 'idempotency_key', 'lease_expires_at', 'holder', 'result', 'conflict_id', 'changed', 'more_changed', 'own_call'), ('earlier_attempt', 'retry_after_seconds', 'record', 'claim_id', 'status', 'attempt', 'warnings', 'claim_token', 'idempotency_key', 'lease_expires_at', 'holder', 'result', 'conflict_id', 'changed', 'more_changed', 'own_call'), ('warnings',))] = __init__.__code__

def __init__(self, *, decision, reviewer, note):
    self.__dict__.update(decision=decision, reviewer=reviewer, note=note)
INITS[(('decision', 'reviewer', 'note'), ('decision', 'reviewer', 'note'), ())] = __init__.__code__

def __init__(self, event, dimensions):
    self.__dict__.update(event=event, dimensions=dimensions)
INITS[(('event', 'dimensions'), (), ())] = __init__.__code__

def __init__(self, event, started, round_trips, dimensions):
    self.__dict__.update(event=event, started=started, round_trips=round_trips, dimensions=__factory_dimensions__() if dimensions is __made_by_factory__ else dimensions)
INITS[(('event', 'started', 'round_trips', 'dimensions'), (), ('dimensions',))] = __init__.__code__

def __init__(self, first_seen_at, last_seen_at, counts, sources, example_claim_id, matched):
    self.__dict__.update(first_seen_at=first_seen_at, last_seen_at=last_seen_at, counts=__factory_counts__() if counts is __made_by_factory__ else counts, sources=__factory_sources__() if sources is __made_by_factory__ else sources, example_claim_id=example_claim_id, matched=__factory_matched__() if matched is __made_by_factory__ else matched)
INITS[(('first_seen_at', 'last_seen_at', 'counts', 'sources', 'example_claim_id', 'matched'), (), ('counts', 'sources', 'matched'))] = __init__.__code__

def __init__(self, *, flow, lease_expires_at):
    self.__dict__.update(flow=flow, lease_expires_at=lease_expires_at)
INITS[(('flow', 'lease_expires_at'), ('flow', 'lease_expires_at'), ())] = __init__.__code__

def __init__(self, *, flow, owner, enabled, notes):
    self.__dict__.update(flow=flow, owner=owner, enabled=enabled, notes=notes)
INITS[(('flow', 'owner', 'enabled', 'notes'), ('flow', 'owner', 'enabled', 'notes'), ())] = __init__.__code__

def __init__(self, flow, owner, enabled, notes, registered_at, first_seen_at, last_seen_at, claims, duplicates, claims_by_source, version):
    self.__dict__.update(flow=flow, owner=owner, enabled=enabled, notes=notes, registered_at=registered_at, first_seen_at=first_seen_at, last_seen_at=last_seen_at, claims=claims, duplicates=duplicates, claims_by_source=__factory_claims_by_source__() if claims_by_source is __made_by_factory__ else claims_by_source, version=version)
INITS[(('flow', 'owner', 'enabled', 'notes', 'registered_at', 'first_seen_at', 'last_seen_at', 'claims', 'duplicates', 'claims_by_source', 'version'), (), ('claims_by_source',))] = __init__.__code__

def __init__(self, flows, count, first_seen_at, last_seen_at, example_claim_id, version):
    self.__dict__.update(flows=flows, count=count, first_seen_at=first_seen_at, last_seen_at=last_seen_at, example_claim_id=example_claim_id, version=version)
INITS[(('flows', 'count', 'first_seen_at', 'last_seen_at', 'example_claim_id', 'version'), (), ())] = __init__.__code__

def __init__(self, fresh_until, flows, scopes):
    self.__dict__.update(fresh_until=fresh_until, flows=flows, scopes=scopes)
INITS[(('fresh_until', 'flows', 'scopes'), (), ())] = __init__.__code__

def __init__(self, hasher, claim_id, fingerprint, members, granted_to):
    self.__dict__.update(hasher=hasher, claim_id=claim_id, fingerprint=fingerprint, members=members, granted_to=granted_to)
INITS[(('hasher', 'claim_id', 'fingerprint', 'members', 'granted_to'), (), ())] = __init__.__code__

def __init__(self, header, leaves, text, width, under):
    self.__dict__.update(header=header, leaves=leaves, text=text, width=width, under=under)
INITS[(('header', 'leaves', 'text', 'width', 'under'), (), ())] = __init__.__code__

def __init__(self, issuers, keys, read_at):
    self.__dict__.update(issuers=issuers, keys=keys, read_at=read_at)
INITS[(('issuers', 'keys', 'read_at'), (), ())] = __init__.__code__

def __init__(self, items, cursor):
    self.__dict__.update(items=items, cursor=cursor)
INITS[(('items', 'cursor'), (), ())] = __init__.__code__

def __init__(self, key, blank, add, list, save):
    self.__dict__.update(key=key, blank=blank, add=add, list=list, save=save)
INITS[(('key', 'blank', 'add', 'list', 'save'), (), ())] = __init__.__code__

def __init__(self, key, claim, raw, error):
    self.__dict__.update(key=key, claim=claim, raw=raw, error=error)
INITS[(('key', 'claim', 'raw', 'error'), (), ())] = __init__.__code__

def __init__(self, key_id, added_at, in_use_from, retired_at, version):
    self.__dict__.update(key_id=key_id, added_at=added_at, in_use_from=in_use_from, retired_at=retired_at, version=version)
INITS[(('key_id', 'added_at', 'in_use_from', 'retired_at', 'version'), (), ())] = __init__.__code__

def __init__(self, key_id, claim_id, fingerprints):
    self.__dict__.update(key_id=key_id, claim_id=claim_id, fingerprints=fingerprints)
INITS[(('key_id', 'claim_id', 'fingerprints'), (), ())] = __init__.__code__

def __init__(self, keyed, plain):
    self.__dict__.update(keyed=keyed, plain=plain)
INITS[(('keyed', 'plain'), (), ())] = __init__.__code__

def __init__(self, *, limit, cursor):
    self.__dict__.update(limit=limit, cursor=cursor)
INITS[(('limit', 'cursor'), ('limit', 'cursor'), ())] = __init__.__code__

def __init__(self, *, limit, cursor, scope):
    self.__dict__.update(limit=limit, cursor=cursor, scope=scope)
INITS[(('limit', 'cursor', 'scope'), ('limit', 'cursor', 'scope'), ())] = __init__.__code__

def __init__(self, *, limit, cursor, status, scope):
    self.__dict__.update(limit=limit, cursor=cursor, status=status, scope=scope)
INITS[(('limit', 'cursor', 'status', 'scope'), ('limit', 'cursor', 'status', 'scope'), ())] = __init__.__code__

def __init__(self, message, target, busy):
    self.__dict__.update(message=message, target=target, busy=busy)
INITS[(('message', 'target', 'busy'), (), ())] = __init__.__code__

def __init__(self, *, method, path, headers, body, idempotency_key, seconds_left):
    self.__dict__.update(method=method, path=path, headers=__factory_headers__() if headers is __made_by_factory__ else headers, body=body, idempotency_key=idempotency_key, seconds_left=seconds_left)
INITS[(('method', 'path', 'headers', 'body', 'idempotency_key', 'seconds_left'), ('method', 'path', 'headers', 'body', 'idempotency_key', 'seconds_left'), ('headers',))] = __init__.__code__

def __init__(self, *, name, base_url, timeout_seconds, lookup_path, auth, allow_cidrs, honours_idempotency_key, success_statuses, retryable_statuses, record_pointer, kept_headers, kept_pointers):
    self.__dict__.update(name=name, base_url=base_url, timeout_seconds=timeout_seconds, lookup_path=lookup_path, auth=auth, allow_cidrs=allow_cidrs, honours_idempotency_key=honours_idempotency_key, success_statuses=success_statuses, retryable_statuses=retryable_statuses, record_pointer=record_pointer, kept_headers=kept_headers, kept_pointers=kept_pointers)
INITS[(('name', 'base_url', 'timeout_seconds', 'lookup_path', 'auth', 'allow_cidrs', 'honours_idempotency_key', 'success_statuses', 'retryable_statuses', 'record_pointer', 'kept_headers', 'kept_pointers'), ('name', 'base_url', 'timeout_seconds', 'lookup_path', 'auth', 'allow_cidrs', 'honours_idempotency_key', 'success_statuses', 'retryable_statuses', 'record_pointer', 'kept_headers', 'kept_pointers'), ())] = __init__.__code__

def __init__(self, *, name, base_url, timeout_seconds, lookup_path, auth, auth_value, allow_cidrs, honours_idempotency_key, success_statuses, retryable_statuses, record_pointer, kept_headers, kept_pointers, declared_by, declared_at, version):
    self.__dict__.update(name=name, base_url=base_url, timeout_seconds=timeout_seconds, lookup_path=lookup_path, auth=auth, auth_value=auth_value, allow_cidrs=allow_cidrs, honours_idempotency_key=honours_idempotency_key, success_statuses=success_statuses, retryable_statuses=retryable_statuses, record_pointer=record_pointer, kept_headers=kept_headers, kept_pointers=kept_pointers, declared_by=declared_by, declared_at=declared_at, version=version)
INITS[(('name', 'base_url', 'timeout_seconds', 'lookup_path', 'auth', 'auth_value', 'allow_cidrs', 'honours_idempotency_key', 'success_statuses', 'retryable_statuses', 'record_pointer', 'kept_headers', 'kept_pointers', 'declared_by', 'declared_at', 'version'), ('name', 'base_url', 'timeout_seconds', 'lookup_path', 'auth', 'auth_value', 'allow_cidrs', 'honours_idempotency_key', 'success_statuses', 'retryable_statuses', 'record_pointer', 'kept_headers', 'kept_pointers', 'declared_by', 'declared_at', 'version'), ())] = __init__.__code__

def __init__(self, name, deviations):
    self.__dict__.update(name=name, deviations=deviations)
INITS[(('name', 'deviations'), (), ())] = __init__.__code__

def __init__(self, name, dimensions):
    self.__dict__.update(name=name, dimensions=dimensions)
INITS[(('name', 'dimensions'), (), ())] = __init__.__code__

def __init__(self, name, environment):
    self.__dict__.update(name=name, environment=environment)
INITS[(('name', 'environment'), (), ())] = __init__.__code__

def __init__(self, name, roles):
    self.__dict__.update(name=name, roles=roles)
INITS[(('name', 'roles'), (), ())] = __init__.__code__

def __init__(self, *, name, route, method, response, designer, parse, serve, render, body, query, role, event, stores, describe, list_name, adjust, instead, body_limit, items, reads, in_connector, as_members):
    self.__dict__.update(name=name, route=route, method=method, response=response, designer=designer, parse=parse, serve=serve, render=render, body=body, query=query, role=role, event=event, stores=stores, describe=describe, list_name=list_name, adjust=adjust, instead=instead, body_limit=body_limit, items=items, reads=reads, in_connector=in_connector, as_members=as_members)
INITS[(('name', 'route', 'method', 'response', 'designer', 'parse', 'serve', 'render', 'body', 'query', 'role', 'event', 'stores', 'describe', 'list_name', 'adjust', 'instead', 'body_limit', 'items', 'reads', 'in_connector', 'as_members'), ('name', 'route', 'method', 'response', 'designer', 'parse', 'serve', 'render', 'body', 'query', 'role', 'event', 'stores', 'describe', 'list_name', 'adjust', 'instead', 'body_limit', 'items', 'reads', 'in_connector', 'as_members'), ())] = __init__.__code__

def __init__(self, name, route, methods, function, pattern, catch_all, anonymous):
    self.__dict__.update(name=name, route=route, methods=methods, function=function, pattern=pattern, catch_all=catch_all, anonymous=anonymous)
INITS[(('name', 'route', 'methods', 'function', 'pattern', 'catch_all', 'anonymous'), (), ())] = __init__.__code__

def __init__(self, *, operation_id, summary, description, visibility, success, errors, body_description, extra, conflict_description, accepted):
    self.__dict__.update(operation_id=operation_id, summary=summary, description=description, visibility=visibility, success=success, errors=errors, body_description=body_description, extra=__factory_extra__() if extra is __made_by_factory__ else extra, conflict_description=conflict_description, accepted=accepted)
INITS[(('operation_id', 'summary', 'description', 'visibility', 'success', 'errors', 'body_description', 'extra', 'conflict_description', 'accepted'), ('operation_id', 'summary', 'description', 'visibility', 'success', 'errors', 'body_description', 'extra', 'conflict_description', 'accepted'), ('extra',))] = __init__.__code__

def __init__(self, *, outcome, decision, error, retryable):
    self.__dict__.update(outcome=outcome, decision=decision, error=error, retryable=retryable)
INITS[(('outcome', 'decision', 'error', 'retryable'), ('outcome', 'decision', 'error', 'retryable'), ())] = __init__.__code__

def __init__(self, outcome, target_record_id, data, error, retryable):
    self.__dict__.update(outcome=outcome, target_record_id=target_record_id, data=data, error=error, retryable=retryable)
INITS[(('outcome', 'target_record_id', 'data', 'error', 'retryable'), (), ())] = __init__.__code__

def __init__(self, path, header, end, records):
    self.__dict__.update(path=path, header=header, end=end, records=records)
INITS[(('path', 'header', 'end', 'records'), (), ())] = __init__.__code__

def __init__(self, raw, model):
    self.__dict__.update(raw=raw, model=model)
INITS[(('raw', 'model'), (), ())] = __init__.__code__

def __init__(self, raw, text, note, exit_code):
    self.__dict__.update(raw=raw, text=text, note=note, exit_code=exit_code)
INITS[(('raw', 'text', 'note', 'exit_code'), (), ())] = __init__.__code__

def __init__(self, record, fingerprint, recognised_by, details):
    self.__dict__.update(record=record, fingerprint=fingerprint, recognised_by=recognised_by, details=details)
INITS[(('record', 'fingerprint', 'recognised_by', 'details'), (), ())] = __init__.__code__

def __init__(self, record, outcome, recognised_by):
    self.__dict__.update(record=record, outcome=outcome, recognised_by=recognised_by)
INITS[(('record', 'outcome', 'recognised_by'), (), ())] = __init__.__code__

def __init__(self, restored_from, export_id, exported_at, started_at, forgotten_until, records_done, completed_at):
    self.__dict__.update(restored_from=restored_from, export_id=export_id, exported_at=exported_at, started_at=started_at, forgotten_until=forgotten_until, records_done=records_done, completed_at=completed_at)
INITS[(('restored_from', 'export_id', 'exported_at', 'started_at', 'forgotten_until', 'records_done', 'completed_at'), (), ())] = __init__.__code__

def __init__(self, reviewer, attempt, outcome, now, target_record_id, data):
    self.__dict__.update(reviewer=reviewer, attempt=attempt, outcome=outcome, now=now, target_record_id=target_record_id, data=data)
INITS[(('reviewer', 'attempt', 'outcome', 'now', 'target_record_id', 'data'), (), ())] = __init__.__code__

def __init__(self, *, reviewer, note):
    self.__dict__.update(reviewer=reviewer, note=note)
INITS[(('reviewer', 'note'), ('reviewer', 'note'), ())] = __init__.__code__

def __init__(self, *, reviewer, note, outcome, attempt, target_record_id, data):
    self.__dict__.update(reviewer=reviewer, note=note, outcome=outcome, attempt=attempt, target_record_id=target_record_id, data=data)
INITS[(('reviewer', 'note', 'outcome', 'attempt', 'target_record_id', 'data'), ('reviewer', 'note', 'outcome', 'attempt', 'target_record_id', 'data'), ())] = __init__.__code__

def __init__(self, *, run_id, flow, scope, source, reference, key, payload, supplied_fingerprint, lease_seconds, now, fingerprint, granted_to, claim_id, key_id, lease, grant_id, decided_at, rules_version, rules, members, changed, warnings, identities, fingerprint_in, may_claim, data, look_up_data):
    self.__dict__.update(run_id=run_id, flow=flow, scope=scope, source=source, reference=reference, key=key, payload=payload, supplied_fingerprint=supplied_fingerprint, lease_seconds=lease_seconds, now=now, fingerprint=fingerprint, granted_to=granted_to, claim_id=claim_id, key_id=key_id, lease=lease, grant_id=grant_id, decided_at=decided_at, rules_version=rules_version, rules=rules, members=members, changed=changed, warnings=warnings, identities=identities, fingerprint_in=fingerprint_in, may_claim=may_claim, data=data, look_up_data=look_up_data)
INITS[(('run_id', 'flow', 'scope', 'source', 'reference', 'key', 'payload', 'supplied_fingerprint', 'lease_seconds', 'now', 'fingerprint', 'granted_to', 'claim_id', 'key_id', 'lease', 'grant_id', 'decided_at', 'rules_version', 'rules', 'members', 'changed', 'warnings', 'identities', 'fingerprint_in', 'may_claim', 'data', 'look_up_data'), ('run_id', 'flow', 'scope', 'source', 'reference', 'key', 'payload', 'supplied_fingerprint', 'lease_seconds', 'now', 'fingerprint', 'granted_to', 'claim_id', 'key_id', 'lease', 'grant_id', 'decided_at', 'rules_version', 'rules', 'members', 'changed', 'warnings', 'identities', 'fingerprint_in', 'may_claim', 'data', 'look_up_data'), ())] = __init__.__code__

def __init__(self, scheme, host, port, path, headers):
    self.__dict__.update(scheme=scheme, host=host, port=port, path=path, headers=headers)
INITS[(('scheme', 'host', 'port', 'path', 'headers'), (), ())] = __init__.__code__

def __init__(self, *, scope, key):
    self.__dict__.update(scope=scope, key=key)
INITS[(('scope', 'key'), ('scope', 'key'), ())] = __init__.__code__

def __init__(self, *, scope, key, payload, fingerprint, source):
    self.__dict__.update(scope=scope, key=key, payload=payload, fingerprint=fingerprint, source=source)
INITS[(('scope', 'key', 'payload', 'fingerprint', 'source'), ('scope', 'key', 'payload', 'fingerprint', 'source'), ())] = __init__.__code__

def __init__(self, *, scope, key, payload, fingerprint, source, run_id, flow, reason, details):
    self.__dict__.update(scope=scope, key=key, payload=payload, fingerprint=fingerprint, source=source, run_id=run_id, flow=flow, reason=reason, details=details)
INITS[(('scope', 'key', 'payload', 'fingerprint', 'source', 'run_id', 'flow', 'reason', 'details'), ('scope', 'key', 'payload', 'fingerprint', 'source', 'run_id', 'flow', 'reason', 'details'), ())] = __init__.__code__

def __init__(self, *, scope, key, payload, fingerprint, source, run_id, target, method, path, headers, body, flow, reference):
    self.__dict__.update(scope=scope, key=key, payload=payload, fingerprint=fingerprint, source=source, run_id=run_id, target=target, method=method, path=path, headers=headers, body=body, flow=flow, reference=reference)
INITS[(('scope', 'key', 'payload', 'fingerprint', 'source', 'run_id', 'target', 'method', 'path', 'headers', 'body', 'flow', 'reference'), ('scope', 'key', 'payload', 'fingerprint', 'source', 'run_id', 'target', 'method', 'path', 'headers', 'body', 'flow', 'reference'), ())] = __init__.__code__

def __init__(self, scope, owner, lease_seconds, retention_days, description, key_pattern, fingerprint_rules, horizon_days, registered_at, first_seen_at, last_seen_at, claims_by_status, claims_by_source, version):
    self.__dict__.update(scope=scope, owner=owner, lease_seconds=lease_seconds, retention_days=retention_days, description=description, key_pattern=key_pattern, fingerprint_rules=fingerprint_rules, horizon_days=horizon_days, registered_at=registered_at, first_seen_at=first_seen_at, last_seen_at=last_seen_at, claims_by_status=__factory_claims_by_status__() if claims_by_status is __made_by_factory__ else claims_by_status, claims_by_source=__factory_claims_by_source__() if claims_by_source is __made_by_factory__ else claims_by_source, version=version)
INITS[(('scope', 'owner', 'lease_seconds', 'retention_days', 'description', 'key_pattern', 'fingerprint_rules', 'horizon_days', 'registered_at', 'first_seen_at', 'last_seen_at', 'claims_by_status', 'claims_by_source', 'version'), (), ('claims_by_status', 'claims_by_source'))] = __init__.__code__

def __init__(self, *, scope, owner, lease_seconds, retention_days, horizon_days, description, key_pattern, fingerprint_include, fingerprint_ignore, fingerprint_preset):
    self.__dict__.update(scope=scope, owner=owner, lease_seconds=lease_seconds, retention_days=retention_days, horizon_days=horizon_days, description=description, key_pattern=key_pattern, fingerprint_include=fingerprint_include, fingerprint_ignore=fingerprint_ignore, fingerprint_preset=fingerprint_preset)
INITS[(('scope', 'owner', 'lease_seconds', 'retention_days', 'horizon_days', 'description', 'key_pattern', 'fingerprint_include', 'fingerprint_ignore', 'fingerprint_preset'), ('scope', 'owner', 'lease_seconds', 'retention_days', 'horizon_days', 'description', 'key_pattern', 'fingerprint_include', 'fingerprint_ignore', 'fingerprint_preset'), ())] = __init__.__code__

def __init__(self, scope, run_id, flow, lease_seconds, identities, rules_version, deadline, since, source, reference, granted_to, has_fingerprint, unwritten):
    self.__dict__.update(scope=scope, run_id=run_id, flow=flow, lease_seconds=lease_seconds, identities=identities, rules_version=rules_version, deadline=deadline, since=since, source=source, reference=reference, granted_to=granted_to, has_fingerprint=has_fingerprint, unwritten=unwritten)
INITS[(('scope', 'run_id', 'flow', 'lease_seconds', 'identities', 'rules_version', 'deadline', 'since', 'source', 'reference', 'granted_to', 'has_fingerprint', 'unwritten'), (), ())] = __init__.__code__

def __init__(self, status, code, retry_after):
    self.__dict__.update(status=status, code=code, retry_after=retry_after)
INITS[(('status', 'code', 'retry_after'), (), ())] = __init__.__code__

def __init__(self, *, status, headers, body):
    self.__dict__.update(status=status, headers=__factory_headers__() if headers is __made_by_factory__ else headers, body=body)
INITS[(('status', 'headers', 'body'), ('status', 'headers', 'body'), ('headers',))] = __init__.__code__

def __init__(self, *, status, headers, body, failure, reason):
    self.__dict__.update(status=status, headers=__factory_headers__() if headers is __made_by_factory__ else headers, body=body, failure=failure, reason=reason)
INITS[(('status', 'headers', 'body', 'failure', 'reason'), ('status', 'headers', 'body', 'failure', 'reason'), ('headers',))] = __init__.__code__

def __init__(self, statuses, scope, changed_before, source, reference, received_since, tombstones):
    self.__dict__.update(statuses=statuses, scope=scope, changed_before=changed_before, source=source, reference=reference, received_since=received_since, tombstones=tombstones)
INITS[(('statuses', 'scope', 'changed_before', 'source', 'reference', 'received_since', 'tombstones'), (), ())] = __init__.__code__

def __init__(self, step, key, action, run_id, answer, ms, attempt, target_record_id, conflict_id, reason, refused):
    self.__dict__.update(step=step, key=key, action=action, run_id=run_id, answer=answer, ms=ms, attempt=attempt, target_record_id=target_record_id, conflict_id=conflict_id, reason=reason, refused=refused)
INITS[(('step', 'key', 'action', 'run_id', 'answer', 'ms', 'attempt', 'target_record_id', 'conflict_id', 'reason', 'refused'), (), ())] = __init__.__code__

def __init__(self, store, sqlite_path, tables_connection_string, tables_endpoint, table_prefix, key_secret, auth, key_secret_previous, key_secret_next, sensitive_keys, sensitive_data, require_registered_flows, unknown_alert_minutes, bulk_concurrency, store_id, entra, targets_allow_loopback):
    self.__dict__.update(store=store, sqlite_path=sqlite_path, tables_connection_string=tables_connection_string, tables_endpoint=tables_endpoint, table_prefix=table_prefix, key_secret=key_secret, auth=auth, key_secret_previous=key_secret_previous, key_secret_next=key_secret_next, sensitive_keys=sensitive_keys, sensitive_data=sensitive_data, require_registered_flows=require_registered_flows, unknown_alert_minutes=unknown_alert_minutes, bulk_concurrency=bulk_concurrency, store_id=store_id, entra=entra, targets_allow_loopback=targets_allow_loopback)
INITS[(('store', 'sqlite_path', 'tables_connection_string', 'tables_endpoint', 'table_prefix', 'key_secret', 'auth', 'key_secret_previous', 'key_secret_next', 'sensitive_keys', 'sensitive_data', 'require_registered_flows', 'unknown_alert_minutes', 'bulk_concurrency', 'store_id', 'entra', 'targets_allow_loopback'), (), ())] = __init__.__code__

def __init__(self, store_id, secrets, tables, tables_marked, holds_claims, clock, restoring, asked_at, answered_at):
    self.__dict__.update(store_id=store_id, secrets=secrets, tables=tables, tables_marked=tables_marked, holds_claims=holds_claims, clock=clock, restoring=restoring, asked_at=asked_at, answered_at=answered_at)
INITS[(('store_id', 'secrets', 'tables', 'tables_marked', 'holds_claims', 'clock', 'restoring', 'asked_at', 'answered_at'), (), ())] = __init__.__code__

def __init__(self, table, store_id, missing):
    self.__dict__.update(table=table, store_id=store_id, missing=missing)
INITS[(('table', 'store_id', 'missing'), (), ())] = __init__.__code__

def __init__(self, tenant, client_id, scope, client_secret, cache_path):
    self.__dict__.update(tenant=tenant, client_id=client_id, scope=scope, client_secret=client_secret, cache_path=cache_path)
INITS[(('tenant', 'client_id', 'scope', 'client_secret', 'cache_path'), (), ())] = __init__.__code__

def __init__(self, tenant_id, client_id, authority, extra_audiences):
    self.__dict__.update(tenant_id=tenant_id, client_id=client_id, authority=authority, extra_audiences=extra_audiences)
INITS[(('tenant_id', 'client_id', 'authority', 'extra_audiences'), (), ())] = __init__.__code__

def __init__(self, unwritten, keep, poll):
    self.__dict__.update(unwritten=unwritten, keep=keep, poll=poll)
INITS[(('unwritten', 'keep', 'poll'), (), ())] = __init__.__code__

def __init__(self, url, scope, concurrency, flow, keys, calls, lookups, checks, notes, store, source, blocked, fix, batch):
    self.__dict__.update(url=url, scope=scope, concurrency=concurrency, flow=flow, keys=keys, calls=calls, lookups=lookups, checks=checks, notes=notes, store=store, source=source, blocked=blocked, fix=fix, batch=batch)
INITS[(('url', 'scope', 'concurrency', 'flow', 'keys', 'calls', 'lookups', 'checks', 'notes', 'store', 'source', 'blocked', 'fix', 'batch'), (), ())] = __init__.__code__

def __init__(self, version, include, ignore, preset, preset_ignore, matched):
    self.__dict__.update(version=version, include=include, ignore=ignore, preset=preset, preset_ignore=preset_ignore, matched=matched)
INITS[(('version', 'include', 'ignore', 'preset', 'preset_ignore', 'matched'), (), ())] = __init__.__code__
