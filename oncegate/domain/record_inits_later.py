"""The ``__init__`` of every record of the modules ``import function_app`` leaves to their first use (the others: ``record_inits``), written by ``python -m tools.records`` from the records' fields: do not edit.

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

def __init__(self, body, intent, warnings):
    self.__dict__.update(body=body, intent=intent, warnings=warnings)
INITS[(('body', 'intent', 'warnings'), (), ())] = __init__.__code__

def __init__(self, claim, events, fingerprints, changed_at):
    self.__dict__.update(claim=claim, events=events, fingerprints=fingerprints, changed_at=changed_at)
INITS[(('claim', 'events', 'fingerprints', 'changed_at'), (), ())] = __init__.__code__

def __init__(self, claim, why, since):
    self.__dict__.update(claim=claim, why=why, since=since)
INITS[(('claim', 'why', 'since'), (), ())] = __init__.__code__

def __init__(self, *, claim_token, lease_seconds):
    self.__dict__.update(claim_token=claim_token, lease_seconds=lease_seconds)
INITS[(('claim_token', 'lease_seconds'), ('claim_token', 'lease_seconds'), ())] = __init__.__code__

def __init__(self, *, claim_token, reason):
    self.__dict__.update(claim_token=claim_token, reason=reason)
INITS[(('claim_token', 'reason'), ('claim_token', 'reason'), ())] = __init__.__code__

def __init__(self, *, claim_token, result):
    self.__dict__.update(claim_token=claim_token, result=result)
INITS[(('claim_token', 'result'), ('claim_token', 'result'), ())] = __init__.__code__

def __init__(self, client, scope, flow, keys, numbers, source, held):
    self.__dict__.update(client=client, scope=scope, flow=flow, keys=keys, numbers=numbers, source=source, held=__factory_held__() if held is __made_by_factory__ else held)
INITS[(('client', 'scope', 'flow', 'keys', 'numbers', 'source', 'held'), (), ('held',))] = __init__.__code__

def __init__(self, count, oldest):
    self.__dict__.update(count=count, oldest=oldest)
INITS[(('count', 'oldest'), (), ())] = __init__.__code__

def __init__(self, *, decision, claim_id, status, attempt, reason, warnings, response, target_record_id, idempotency_key, claim_token, lease_expires_at, retry_after_seconds, retryable, conflict_id, earlier_attempt, looked_up, target_status, target_failure):
    self.__dict__.update(decision=decision, claim_id=claim_id, status=status, attempt=attempt, reason=reason, warnings=__factory_warnings__() if warnings is __made_by_factory__ else warnings, response=response, target_record_id=target_record_id, idempotency_key=idempotency_key, claim_token=claim_token, lease_expires_at=lease_expires_at, retry_after_seconds=retry_after_seconds, retryable=retryable, conflict_id=conflict_id, earlier_attempt=earlier_attempt, looked_up=looked_up, target_status=target_status, target_failure=target_failure)
INITS[(('decision', 'claim_id', 'status', 'attempt', 'reason', 'warnings', 'response', 'target_record_id', 'idempotency_key', 'claim_token', 'lease_expires_at', 'retry_after_seconds', 'retryable', 'conflict_id', 'earlier_attempt', 'looked_up', 'target_status', 'target_failure'), ('decision', 'claim_id', 'status', 'attempt', 'reason', 'warnings', 'response', 'target_record_id', 'idempotency_key', 'claim_token', 'lease_expires_at', 'retry_after_seconds', 'retryable', 'conflict_id', 'earlier_attempt', 'looked_up', 'target_status', 'target_failure'), ('warnings',))] = __init__.__code__

def __init__(self, *, decision, reviewer, note):
    self.__dict__.update(decision=decision, reviewer=reviewer, note=note)
INITS[(('decision', 'reviewer', 'note'), ('decision', 'reviewer', 'note'), ())] = __init__.__code__

def __init__(self, *, flow, owner, enabled, notes):
    self.__dict__.update(flow=flow, owner=owner, enabled=enabled, notes=notes)
INITS[(('flow', 'owner', 'enabled', 'notes'), ('flow', 'owner', 'enabled', 'notes'), ())] = __init__.__code__

def __init__(self, header, leaves, text, width, under):
    self.__dict__.update(header=header, leaves=leaves, text=text, width=width, under=under)
INITS[(('header', 'leaves', 'text', 'width', 'under'), (), ())] = __init__.__code__

def __init__(self, issuers, keys, read_at):
    self.__dict__.update(issuers=issuers, keys=keys, read_at=read_at)
INITS[(('issuers', 'keys', 'read_at'), (), ())] = __init__.__code__

def __init__(self, key, claim, raw, error):
    self.__dict__.update(key=key, claim=claim, raw=raw, error=error)
INITS[(('key', 'claim', 'raw', 'error'), (), ())] = __init__.__code__

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

def __init__(self, name, route, methods, function, pattern, catch_all, anonymous):
    self.__dict__.update(name=name, route=route, methods=methods, function=function, pattern=pattern, catch_all=catch_all, anonymous=anonymous)
INITS[(('name', 'route', 'methods', 'function', 'pattern', 'catch_all', 'anonymous'), (), ())] = __init__.__code__

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

def __init__(self, scheme, host, port, path, headers):
    self.__dict__.update(scheme=scheme, host=host, port=port, path=path, headers=headers)
INITS[(('scheme', 'host', 'port', 'path', 'headers'), (), ())] = __init__.__code__

def __init__(self, *, scope, key, payload, fingerprint, source, run_id, flow, reason, details):
    self.__dict__.update(scope=scope, key=key, payload=payload, fingerprint=fingerprint, source=source, run_id=run_id, flow=flow, reason=reason, details=details)
INITS[(('scope', 'key', 'payload', 'fingerprint', 'source', 'run_id', 'flow', 'reason', 'details'), ('scope', 'key', 'payload', 'fingerprint', 'source', 'run_id', 'flow', 'reason', 'details'), ())] = __init__.__code__

def __init__(self, *, scope, key, payload, fingerprint, source, run_id, target, method, path, headers, body, flow, reference):
    self.__dict__.update(scope=scope, key=key, payload=payload, fingerprint=fingerprint, source=source, run_id=run_id, target=target, method=method, path=path, headers=headers, body=body, flow=flow, reference=reference)
INITS[(('scope', 'key', 'payload', 'fingerprint', 'source', 'run_id', 'target', 'method', 'path', 'headers', 'body', 'flow', 'reference'), ('scope', 'key', 'payload', 'fingerprint', 'source', 'run_id', 'target', 'method', 'path', 'headers', 'body', 'flow', 'reference'), ())] = __init__.__code__

def __init__(self, *, scope, owner, lease_seconds, retention_days, horizon_days, description, key_pattern, fingerprint_include, fingerprint_ignore, fingerprint_preset):
    self.__dict__.update(scope=scope, owner=owner, lease_seconds=lease_seconds, retention_days=retention_days, horizon_days=horizon_days, description=description, key_pattern=key_pattern, fingerprint_include=fingerprint_include, fingerprint_ignore=fingerprint_ignore, fingerprint_preset=fingerprint_preset)
INITS[(('scope', 'owner', 'lease_seconds', 'retention_days', 'horizon_days', 'description', 'key_pattern', 'fingerprint_include', 'fingerprint_ignore', 'fingerprint_preset'), ('scope', 'owner', 'lease_seconds', 'retention_days', 'horizon_days', 'description', 'key_pattern', 'fingerprint_include', 'fingerprint_ignore', 'fingerprint_preset'), ())] = __init__.__code__

def __init__(self, status, code, retry_after):
    self.__dict__.update(status=status, code=code, retry_after=retry_after)
INITS[(('status', 'code', 'retry_after'), (), ())] = __init__.__code__

def __init__(self, *, status, headers, body):
    self.__dict__.update(status=status, headers=__factory_headers__() if headers is __made_by_factory__ else headers, body=body)
INITS[(('status', 'headers', 'body'), ('status', 'headers', 'body'), ('headers',))] = __init__.__code__

def __init__(self, *, status, headers, body, failure, reason):
    self.__dict__.update(status=status, headers=__factory_headers__() if headers is __made_by_factory__ else headers, body=body, failure=failure, reason=reason)
INITS[(('status', 'headers', 'body', 'failure', 'reason'), ('status', 'headers', 'body', 'failure', 'reason'), ('headers',))] = __init__.__code__

def __init__(self, step, key, action, run_id, answer, ms, attempt, target_record_id, conflict_id, reason, refused):
    self.__dict__.update(step=step, key=key, action=action, run_id=run_id, answer=answer, ms=ms, attempt=attempt, target_record_id=target_record_id, conflict_id=conflict_id, reason=reason, refused=refused)
INITS[(('step', 'key', 'action', 'run_id', 'answer', 'ms', 'attempt', 'target_record_id', 'conflict_id', 'reason', 'refused'), (), ())] = __init__.__code__

def __init__(self, tenant, client_id, scope, client_secret, cache_path):
    self.__dict__.update(tenant=tenant, client_id=client_id, scope=scope, client_secret=client_secret, cache_path=cache_path)
INITS[(('tenant', 'client_id', 'scope', 'client_secret', 'cache_path'), (), ())] = __init__.__code__

def __init__(self, url, scope, concurrency, flow, keys, calls, lookups, checks, notes, store, source, blocked, fix, batch):
    self.__dict__.update(url=url, scope=scope, concurrency=concurrency, flow=flow, keys=keys, calls=calls, lookups=lookups, checks=checks, notes=notes, store=store, source=source, blocked=blocked, fix=fix, batch=batch)
INITS[(('url', 'scope', 'concurrency', 'flow', 'keys', 'calls', 'lookups', 'checks', 'notes', 'store', 'source', 'blocked', 'fix', 'batch'), (), ())] = __init__.__code__
