"""The store's HTTP transport: the environment's proxy and CA bundle read once, when the store opens (issue 36).

azure-core's ``requests`` transport has ``requests`` merge the environment into every request it sends
(``trust_env``): the proxy variables and the CA bundle are looked up by scanning the whole ``os.environ``
each time, about 8% of a claim's client CPU on Table Storage. The store talks to one endpoint, so it
reads them once for that endpoint and hands them to the SDK client as settings of its own:

    HTTPS_PROXY, HTTP_PROXY, ALL_PROXY (any case)   the proxy for the endpoint's scheme, unless
    NO_PROXY                                        NO_PROXY names its host
    REQUESTS_CA_BUNDLE, else CURL_CA_BUNDLE         the CA certificates a TLS proxy's are checked against

The same variables ``requests`` reads, with its precedence; set after the store opened, they apply from
the next start. ``.netrc`` credentials, which ``requests`` also reads from the environment, are not used:
the store signs its requests itself.
"""

from __future__ import annotations

import logging
import os
import urllib.request
from typing import Any
from urllib.parse import urlsplit

from azure.core.pipeline.transport import RequestsTransport
from azure.data.tables import TableServiceClient

logger = logging.getLogger(__name__)


def client_options(endpoint: str) -> dict[str, Any]:
    """The SDK client's transport, and its proxy when the environment gives ``endpoint`` one, read now."""
    parts = urlsplit(endpoint)
    proxies = urllib.request.getproxies_environment()
    proxy = proxies.get(parts.scheme) or proxies.get("all")
    if proxy and urllib.request.proxy_bypass(parts.hostname or ""):
        proxy = None
    bundle = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE")
    if proxy or bundle:
        logger.info("Table Storage at %s: proxy %s, CA bundle %s", parts.hostname, proxy or "none", bundle or "none")
    transport = RequestsTransport(use_env_settings=False, connection_verify=bundle or True)
    return {"transport": transport, **({"proxies": {parts.scheme: proxy}} if proxy else {})}


def endpoint_of(conn_str: str) -> str:
    """The table endpoint a connection string names, as the SDK reads it (its account, or ``TableEndpoint``)."""
    with TableServiceClient.from_connection_string(conn_str) as probe:
        return str(probe.url)
