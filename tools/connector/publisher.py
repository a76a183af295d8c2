"""Who publishes the connector: the contact, website, privacy policy and host a certified package carries.

OnceGate has no domain of its own: every organisation deploys its own function app and, to publish the
connector in the gallery, names its own pages. The committed definitions therefore carry none of these
(a private import needs none); ``python -m tools.connector --publisher FILE --out DIR`` writes a package
with the publisher's, and refuses one that still holds a placeholder: an address under a name reserved
for examples and tests (RFC 2606, RFC 6761), a page that is not https, a value left out.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, fields
from pathlib import Path
from urllib.parse import urlsplit

# Domains that never name a real publisher: reserved for documentation and tests, or local, and the
# fictitious companies of Microsoft's own examples (a connector copied from one keeps its addresses).
RESERVED = re.compile(
    r"(^|\.)(example\.(com|net|org)|example|test|invalid|localhost|local"
    r"|contoso\.com|fabrikam\.com|northwindtraders\.com|adventure-works\.com|wingtiptoys\.com)$",
    re.IGNORECASE,
)
HOST = re.compile(r"[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+")
EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@([A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,})")
# The angle brackets of a value still as connector/README.md's publisher file shows it ("<your team or company>").
TEMPLATE = re.compile(r"[<>]")
KEYS = {"name": "name", "email": "email", "support_url": "supportUrl", "website": "website"}
KEYS |= {"privacy_policy": "privacyPolicy", "host": "host"}


class PublisherError(ValueError):
    """The publisher file cannot be read, or names a placeholder; the message lists every problem."""


@dataclass(frozen=True)
class Publisher:
    name: str
    email: str
    support_url: str
    website: str
    privacy_policy: str
    host: str


def reserved(host: str) -> bool:
    return bool(RESERVED.search(host.rstrip(".")))


def problems(publisher: Publisher) -> list[str]:
    """What keeps the package from the gallery: each field that is missing or a placeholder."""
    found = [f"{KEYS[f.name]} is empty" for f in fields(publisher) if not getattr(publisher, f.name).strip()]
    if TEMPLATE.search(publisher.name):
        found.append(f"name {publisher.name!r} is a placeholder")
    for key, url in (
        ("supportUrl", publisher.support_url),
        ("website", publisher.website),
        ("privacyPolicy", publisher.privacy_policy),
    ):
        found += url_problems(key, url)
    match = EMAIL.fullmatch(publisher.email)
    if publisher.email and match is None:
        found.append(f"email {publisher.email!r} is not an e-mail address")
    elif match is not None and reserved(match.group(1)):
        found.append(f"email {publisher.email!r} is a placeholder")
    if publisher.host and not HOST.fullmatch(publisher.host):
        found.append(f"host {publisher.host!r} is not a bare host name")
    elif publisher.host and reserved(publisher.host):
        found.append(f"host {publisher.host!r} is a placeholder")
    return found


def url_problems(key: str, url: str) -> list[str]:
    if not url:
        return []
    parts = urlsplit(url)
    # A host name, not the README's "<your support page>": urlsplit takes any text before the path for one.
    if parts.scheme != "https" or not parts.hostname or not HOST.fullmatch(parts.hostname):
        return [f"{key} {url!r} is not an https address"]
    if reserved(parts.hostname):
        return [f"{key} {url!r} is a placeholder"]
    return []


def read_publisher(path: Path) -> Publisher:
    """The publisher file: a JSON object with the keys of ``KEYS``; ``PublisherError`` naming each problem."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise PublisherError(f"{path}: {exc}") from exc
    if not isinstance(document, dict):
        raise PublisherError(f"{path}: not a JSON object")
    unknown = sorted(set(document) - set(KEYS.values()))
    values = {name: document.get(key, "") for name, key in KEYS.items()}
    wrong = [KEYS[name] for name, value in values.items() if not isinstance(value, str)]
    if unknown or wrong:
        raise PublisherError(f"{path}: unknown keys {unknown}, not strings {wrong}")
    publisher = Publisher(**values)
    found = problems(publisher)
    if found:
        raise PublisherError(f"{path}: " + "; ".join(found))
    return publisher
