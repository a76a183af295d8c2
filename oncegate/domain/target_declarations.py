"""An operator's declaration of a target, checked field by field before anything is stored (issue 34).

:func:`declare_target` is the one check, the same for ``oncegate targets set`` and ``PUT /api/targets``: it
takes the fields as the operator wrote them and returns the :class:`~oncegate.domain.targets.Target` to store,
or raises ``InvalidRequest`` whose ``target`` is the field's wire name (``baseUrl``, ``timeoutSeconds``...).

A secret is never part of a declaration, only its name: ``secret:HEADER=NAME`` where ``NAME`` starts with
:data:`SECRET_PREFIX` (so never the key secret, ``oncegate-key-secret``). The app reads it with its own
identity: a Key Vault reference in the setting :func:`secret_setting` names in Azure, a file of that name
in the local secrets folder beside the SQLite database otherwise (``oncegate.outbound.target_secrets``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol, TypeVar
from urllib.parse import quote, urlsplit

from oncegate.domain.copies import frozen
from oncegate.domain.records import LONGEST_CALL_SECONDS
from oncegate.domain.target_addresses import AddressRefused, IPNetwork, check_cidr, refusal, written_address
from oncegate.domain.target_requests import FORBIDDEN_HEADERS, TOKEN, RequestRefused, path_under
from oncegate.domain.targets import Target, TargetAuth
from oncegate.errors import InvalidRequest

NAME = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\Z")
HOST_NAME = re.compile(
    r"^(?=.{1,253}\Z)([a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*\.?\Z"
)
# Key Vault secret names are letters, digits and hyphens, up to 127; the prefix keeps them apart from the key secret.
SECRET_PREFIX = "oncegate-target-"
SECRET_NAME = re.compile(r"^oncegate-target-[a-z0-9](?:[a-z0-9-]{0,109}[a-z0-9])?\Z")
AUDIENCE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._~:/?=&%-]{0,199}\Z")
LOOKUP_PLACEHOLDERS = ("reference", "idempotencyKey")
PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
POINTER = re.compile(r"^(/([^~/]|~[01])*)*\Z")
MIN_TIMEOUT_SECONDS = 1
MAX_TIMEOUT_SECONDS = LONGEST_CALL_SECONDS  # what a claim's call mark may say (records.call_deadline)
DEFAULT_TIMEOUT_SECONDS = 30
MAX_LISTED = 20
# Response headers a target's answer never keeps: they carry credentials or session state.
UNKEPT_HEADERS = frozenset({"set-cookie", "set-cookie2", "authorization", "www-authenticate", "proxy-authenticate"})
LOOPBACK_NAMES = ("localhost",)
T = TypeVar("T")


@frozen(kw_only=True)
class Declaration:
    """A target as the operator wrote it (``targets set``'s options, ``PUT /api/targets``' body), unchecked.

    A declaration is whole: setting a target again replaces it, and a field left out takes its default.
    """

    name: str
    base_url: str
    timeout_seconds: int = DEFAULT_TIMEOUT_SECONDS
    lookup_path: str | None = None
    auth: str = "none"
    allow_cidrs: tuple[str, ...] = ()
    honours_idempotency_key: bool = False
    success_statuses: tuple[int, ...] = ()
    retryable_statuses: tuple[int, ...] = ()
    record_pointer: str | None = None
    kept_headers: tuple[str, ...] = ()
    kept_pointers: tuple[str, ...] = ()


class WrittenFields(Protocol):
    """A declaration's fields as an edge read them: ``targets set``'s options or ``PUT /api/targets``' body."""

    @property
    def name(self) -> str: ...
    @property
    def base_url(self) -> str: ...
    @property
    def timeout_seconds(self) -> int: ...
    @property
    def lookup_path(self) -> str | None: ...
    @property
    def auth(self) -> str: ...
    @property
    def allow_cidrs(self) -> Sequence[str]: ...
    @property
    def honours_idempotency_key(self) -> bool: ...
    @property
    def success_statuses(self) -> Sequence[int]: ...
    @property
    def retryable_statuses(self) -> Sequence[int]: ...
    @property
    def record_pointer(self) -> str | None: ...
    @property
    def kept_headers(self) -> Sequence[str]: ...
    @property
    def kept_pointers(self) -> Sequence[str]: ...


def written(fields: WrittenFields) -> Declaration:
    """The declaration an edge read, field for field: the command line and the wire name its fields alike."""
    return Declaration(
        name=fields.name,
        base_url=fields.base_url,
        timeout_seconds=fields.timeout_seconds,
        lookup_path=fields.lookup_path,
        auth=fields.auth,
        allow_cidrs=tuple(fields.allow_cidrs),
        honours_idempotency_key=fields.honours_idempotency_key,
        success_statuses=tuple(fields.success_statuses),
        retryable_statuses=tuple(fields.retryable_statuses),
        record_pointer=fields.record_pointer,
        kept_headers=tuple(fields.kept_headers),
        kept_pointers=tuple(fields.kept_pointers),
    )


def declare_target(declaration: Declaration, *, allow_loopback: bool = False) -> Target:
    """The target to store, each field checked; raises ``InvalidRequest`` naming the first field that is wrong.

    ``allow_loopback`` is the operator setting ``ONCEGATE_TARGETS_ALLOW_LOOPBACK``: plain ``http`` and loopback
    addresses are refused without it.
    """
    d = declaration
    cidrs = tuple(str(network) for network in _cidrs(d.allow_cidrs))
    auth_kind, auth_value = parse_auth(d.auth)
    return Target(
        name=_name(d.name),
        base_url=_base_url(d.base_url, cidrs, allow_loopback=allow_loopback),
        timeout_seconds=_timeout(d.timeout_seconds),
        lookup_path=_lookup_path(d.lookup_path),
        auth=auth_kind,
        auth_value=auth_value,
        allow_cidrs=cidrs,
        honours_idempotency_key=bool(d.honours_idempotency_key),
        success_statuses=_statuses(d.success_statuses, "successStatuses", 200, 299),
        retryable_statuses=_statuses(d.retryable_statuses, "retryableStatuses", 400, 499),
        record_pointer=_pointer(d.record_pointer, "recordPointer") if d.record_pointer is not None else None,
        kept_headers=_kept_headers(d.kept_headers),
        kept_pointers=tuple(_pointer(pointer, "keptPointers") for pointer in _listed(d.kept_pointers, "keptPointers")),
    )


def auth_text(target: Target) -> str:
    """The target's auth as an operator writes it: ``none``, ``identity:AUDIENCE`` or ``secret:HEADER=SECRET-NAME``
    (a secret's name, never the secret)."""
    return target.auth.value if target.auth_value is None else f"{target.auth.value}:{target.auth_value}"


def parse_auth(text: str) -> tuple[TargetAuth, str | None]:
    """``none``, ``identity:AUDIENCE`` or ``secret:HEADER=SECRET-NAME`` as the auth kind and its value."""
    kind, _, value = text.strip().partition(":")
    if kind == TargetAuth.NONE and not value:
        return TargetAuth.NONE, None
    if kind == TargetAuth.IDENTITY and AUDIENCE.match(value):
        return TargetAuth.IDENTITY, value
    if kind == TargetAuth.SECRET:
        header, _, secret = value.partition("=")
        if not TOKEN.match(header) or header.lower() in FORBIDDEN_HEADERS - {"authorization"}:
            raise _invalid("auth", f"the secret's header {header!r} is not one a secret may be sent in")
        if not SECRET_NAME.match(secret):
            raise _invalid(
                "auth",
                f"the secret is named by reference: a name starting {SECRET_PREFIX} (letters, digits and hyphens, "
                "up to 127), never the secret itself",
            )
        return TargetAuth.SECRET, f"{header}={secret}"
    raise _invalid("auth", "must be none, identity:AUDIENCE or secret:HEADER=SECRET-NAME")


def secret_setting(secret_name: str) -> str:
    """The app setting that holds a target secret in Azure (a Key Vault reference): ``ONCEGATE_TARGET_SECRET_`` and
    the name after the prefix, upper case, hyphens as underscores."""
    return "ONCEGATE_TARGET_SECRET_" + secret_name.removeprefix(SECRET_PREFIX).upper().replace("-", "_")


def lookup_path(template: str, values: Mapping[str, str]) -> str:
    """The look-up path for one claim: each placeholder replaced by its value, percent-encoded whole."""
    return PLACEHOLDER.sub(lambda match: quote(values[match.group(1)], safe=""), template)


def _name(name: str) -> str:
    if not NAME.match(name):
        raise _invalid("name", "must be 1-63 lower-case letters, digits and hyphens, not starting or ending with -")
    return name


def _base_url(text: str, cidrs: tuple[str, ...], *, allow_loopback: bool) -> str:
    if not text.strip().isascii() or not text.strip().isprintable() or " " in text.strip():
        # The URL parser drops tabs and newlines anywhere: "erp.example.com\t.evil.com" is erp.example.com.evil.com.
        raise _invalid("baseUrl", "holds a space, a control character or a character outside ASCII")
    parts = urlsplit(text.strip())
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise _invalid("baseUrl", "must be an https:// URL")
    if parts.username is not None or "@" in parts.netloc or parts.query or parts.fragment or "\\" in text:
        raise _invalid("baseUrl", "must hold no user, query or fragment: only https://host[:port][/path]")
    try:
        port = parts.port
        address = written_address(parts.hostname)
    except (ValueError, AddressRefused) as exc:
        raise _invalid("baseUrl", f"has no host OnceGate may call: {exc}") from None
    if port == 0:
        raise _invalid("baseUrl", "has port 0, which no target listens on")
    if address is None and not HOST_NAME.match(parts.hostname):
        raise _invalid("baseUrl", f"the host {parts.hostname!r} is not a host name (ASCII letters, digits, - and .)")
    loopback = _is_loopback_name(parts.hostname) or (address is not None and address.is_loopback)
    if loopback and not allow_loopback:
        raise _invalid("baseUrl", "may not be loopback (only with ONCEGATE_TARGETS_ALLOW_LOOPBACK, for development)")
    if parts.scheme == "http" and not (loopback and allow_loopback):
        raise _invalid("baseUrl", "must be https:// (plain http only on loopback with ONCEGATE_TARGETS_ALLOW_LOOPBACK)")
    if address is not None:
        reason = refusal(address, allowed=tuple(check_cidr(cidr) for cidr in cidrs), allow_loopback=allow_loopback)
        if reason is not None:
            raise _invalid("baseUrl", f"may not be reached: {reason}")
    path = parts.path.rstrip("/")
    try:
        normal = path_under("", path or "/") if path else ""
    except RequestRefused as exc:
        raise _invalid("baseUrl", f"its path is refused: {exc}") from None
    if normal.rstrip("/") != path:
        raise _invalid("baseUrl", "its path must be written plainly (no ., .., // or encoded dots)")
    netloc = parts.hostname if port is None else f"{_bracketed(parts.hostname)}:{port}"
    return f"{parts.scheme}://{netloc}{path}"


def _is_loopback_name(host: str) -> bool:
    name = host.rstrip(".")
    return name in LOOPBACK_NAMES or name.endswith(".localhost")


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _timeout(value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not MIN_TIMEOUT_SECONDS <= value <= MAX_TIMEOUT_SECONDS:
        raise _invalid(
            "timeoutSeconds",
            f"must be a whole number of seconds from {MIN_TIMEOUT_SECONDS} to {MAX_TIMEOUT_SECONDS} "
            "(a synchronous connector action has about 120)",
        )
    return value


def _lookup_path(template: str | None) -> str | None:
    if template is None:
        return None
    names = PLACEHOLDER.findall(template)
    unknown = [name for name in names if name not in LOOKUP_PLACEHOLDERS]
    if unknown or not names or "{" in PLACEHOLDER.sub("", template) or "}" in PLACEHOLDER.sub("", template):
        allowed = ", ".join("{" + name + "}" for name in LOOKUP_PLACEHOLDERS)
        raise _invalid("lookupPath", f"must name the record by at least one of {allowed}, and no other placeholder")
    try:
        path_under("", lookup_path(template, dict.fromkeys(LOOKUP_PLACEHOLDERS, "x")))
    except RequestRefused as exc:
        raise _invalid("lookupPath", str(exc)) from None
    return template


def _cidrs(values: Iterable[str]) -> list[IPNetwork]:
    try:
        return [check_cidr(text) for text in _listed(values, "allowCidrs")]
    except AddressRefused as exc:
        raise _invalid("allowCidrs", str(exc)) from None


def _statuses(values: Iterable[int], field: str, low: int, high: int) -> tuple[int, ...]:
    statuses = tuple(_listed(values, field))
    if any(isinstance(status, bool) or not isinstance(status, int) or not low <= status <= high for status in statuses):
        raise _invalid(field, f"must be statuses from {low} to {high}")
    return tuple(sorted(set(statuses)))


def _pointer(pointer: str, field: str) -> str:
    if not pointer.startswith("/") or not POINTER.match(pointer) or len(pointer) > 200:
        raise _invalid(field, f"{pointer!r} is not a JSON pointer into the answer's body, such as /id")
    return pointer


def _kept_headers(values: Iterable[str]) -> tuple[str, ...]:
    headers = tuple(_listed(values, "keptHeaders"))
    for header in headers:
        if not TOKEN.match(header) or header.lower() in UNKEPT_HEADERS:
            raise _invalid("keptHeaders", f"{header!r} is not a header OnceGate keeps")
    return headers


def _listed(values: Iterable[T], field: str) -> list[T]:
    listed = list(values)
    if len(listed) > MAX_LISTED:
        raise _invalid(field, f"may list at most {MAX_LISTED}")
    return listed


def _invalid(field: str, message: str) -> InvalidRequest:
    return InvalidRequest(f"{field} {message}.", target=field)
