"""Load the settings a flow runs with, once, at its entry: field by field, the Prefect Block
named "default" > the environment > the default (docs/configuration.md). Blocks are read only
when a Prefect API is configured (without one nothing touches the network and prefect is not
imported) and not with `DSH_MEMORY_IGNORE_BLOCKS=1`. The lookup as a whole gets
SETTINGS_LOOKUP_SECONDS: a server that does not answer by then (refused, hung, trickling its answer)
is logged and skipped, except by a caller that writes memory, which is refused
(ServiceUnavailableError): the environment's memory root may not be the saved one. A saved block
that does not validate raises ConfigError with the way to fix it.
"""

from __future__ import annotations

import base64
import logging
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dsh_memory.errors import ConfigError, ServiceUnavailableError
from dsh_memory.settings import MemorySettings, ModelRoute, env_mapping, problems

BLOCK_NAME = "default"
BLOCK_SLUGS = ("dsh-memory-settings", "dsh-memory-model-route")  # the block types' slugs (blocks/)
IGNORE_BLOCKS_ENV = "DSH_MEMORY_IGNORE_BLOCKS"
# The saved blocks' lookup as a whole, at most: each HTTP read has its own timeout, so a server
# answering a byte at a time would otherwise hold every command for as long as it trickled.
SETTINGS_LOOKUP_SECONDS = 10.0
log = logging.getLogger("dsh_memory.settings")


@dataclass
class ResolvedSettings:
    """Effective settings plus where they came from (for `dsh-memory settings show`)."""

    settings: MemorySettings
    route: ModelRoute
    memory_block: Any = None  # MemorySettingsBlock | None
    route_block: Any = None  # ModelRouteBlock | None
    api_url: str | None = None
    # Block slug → 'loaded' | 'not saved' | a reason the blocks were not consulted.
    blocks: dict[str, str] = field(default_factory=dict)
    unanswered: str = ""  # why the Prefect API gave no saved settings (its status), else ''

    def require_saved(self) -> None:
        """For a writer of memory: ServiceUnavailableError when the saved settings are unknown (the
        Prefect API did not answer), whose memory root may not be the environment's."""
        if self.unanswered:
            raise ServiceUnavailableError(
                f"the saved settings were {self.unanswered}: not writing memory with the environment's "
                "settings, whose memory root may not be the saved one. Start the Prefect API "
                f"(`dsh-memory serve`, `prefect server start`), or unset PREFECT_API_URL or set "
                f"{IGNORE_BLOCKS_ENV}=1 to use the environment only"
            )


def prefect_api_url(env: Mapping[str, str] | None = None, *, profile: bool = False) -> str | None:
    """The configured Prefect API (no trailing slash): PREFECT_API_URL; with `profile`, else the
    active Prefect profile's when prefect is already imported (flows, `settings`). Never imports
    prefect (hooks and the read CLI stay fast)."""
    e = env_mapping(env)
    url = (e.get("PREFECT_API_URL") or "").strip()
    if not url and profile and env is None and "prefect.settings" in sys.modules:
        from prefect.settings import get_current_settings

        url = get_current_settings().api.url or ""
    return url.rstrip("/") or None


def check_api_url(url: str | None) -> str | None:
    """`url` unless it is set but not http(s) (`notaurl`: an httpx traceback later): ConfigError."""
    if url and not url.lower().startswith(("http://", "https://")):
        raise ConfigError(
            f"PREFECT_API_URL {url!r} is not an http(s) URL: set it to a Prefect server's API "
            "(e.g. http://127.0.0.1:4200/api), or unset it"
        )
    return url


def is_loopback_url(url: str) -> bool:
    from urllib.parse import urlsplit

    host = (urlsplit(url).hostname or "").lower()
    return host in ("localhost", "::1") or host.startswith("127.")


def prefect_auth_headers() -> dict[str, str]:
    """Auth for a protected server: PREFECT_API_AUTH_STRING (basic, self-hosted) or PREFECT_API_KEY."""
    if auth := os.environ.get("PREFECT_API_AUTH_STRING"):
        return {"Authorization": f"Basic {base64.b64encode(auth.encode()).decode()}"}
    if key := os.environ.get("PREFECT_API_KEY"):
        return {"Authorization": f"Bearer {key}"}
    return {}


def resolve_settings(
    env: Mapping[str, str] | None = None, use_blocks: bool = True, *, writes: bool = False
) -> ResolvedSettings:
    """Resolve both settings objects; `use_blocks=False` ignores saved blocks (env and defaults only).
    When the Prefect API does not answer the blocks' lookup (within SETTINGS_LOOKUP_SECONDS), a
    caller that `writes` memory gets ServiceUnavailableError; any other, the environment and
    defaults, said in one warning line."""
    e = env_mapping(env)
    mem_block = route_block = None
    unanswered = ""
    url = check_api_url(prefect_api_url(env, profile=True))
    if not use_blocks:
        status = "not consulted (--from-env)"
    elif (e.get(IGNORE_BLOCKS_ENV) or "").strip().lower() in ("1", "true", "yes", "on"):
        status = f"not consulted ({IGNORE_BLOCKS_ENV} is set)"
    elif not url:
        status = "not consulted (no Prefect server configured: PREFECT_API_URL is unset)"
    else:
        loaded, why = _bounded_load(url)
        if loaded is not None:
            status = ""
            mem_block, route_block, blocks = loaded
        else:
            status = unanswered = shown_url(f"not consulted (Prefect API {url} {why})")
    if status:
        blocks = {slug: status for slug in BLOCK_SLUGS}
    settings = mem_block.to_settings(e) if mem_block is not None else MemorySettings.from_env(e)
    route = route_block.to_route(e) if route_block is not None else ModelRoute.from_env(e)
    resolved = ResolvedSettings(settings, route, mem_block, route_block, url, blocks, unanswered)
    if unanswered:
        if writes:
            resolved.require_saved()
        log.warning("dsh-memory settings: %s; using the environment and defaults", unanswered)
    return resolved


def _bounded_load(url: str) -> tuple[tuple[Any, Any, dict[str, str]] | None, str]:
    """`_load_blocks(url)` waited for SETTINGS_LOOKUP_SECONDS at most (Prefect's client included,
    whose own timeouts and retries bound each request, not the whole): its result, or None and why
    the server gave none (unreachable, no answer in time). A call given up on is left to finish
    in its daemon thread (`cancel.bounded`: in a copy of this context, Prefect's settings context)."""
    import httpx

    from dsh_memory.cancel import bounded

    outcome = bounded(lambda: _load_blocks(url), SETTINGS_LOOKUP_SECONDS)
    if not outcome.done():
        return None, f"did not answer within {SETTINGS_LOOKUP_SECONDS:g} s"
    try:
        return outcome.result(), ""
    except (httpx.TransportError, httpx.HTTPStatusError) as exc:  # refused, timed out, hung up: no answer
        return None, f"unreachable: {type(exc).__name__ if isinstance(exc, httpx.TransportError) else exc}"


def _load_blocks(url: str) -> tuple[Any, Any, dict[str, str]]:
    """Read the two "default" block documents (httpx.TransportError or HTTPStatusError when the
    server does not answer). Prefect is imported only when one of them is saved (to validate it as its
    Block class): a plain HTTP query asks first, so commands that find no saved block stay fast."""
    saved = _saved_block_slugs(url)
    if saved is not None and not saved:
        return None, None, {slug: "not saved" for slug in BLOCK_SLUGS}
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound, PrefectHTTPStatusError

    from dsh_memory.blocks import MemorySettingsBlock, ModelRouteBlock

    found: dict[str, Any] = {}
    status: dict[str, str] = {}
    try:
        with get_client(sync_client=True) as client:
            for cls in (MemorySettingsBlock, ModelRouteBlock):
                slug = cls.get_block_type_slug()
                try:
                    doc = client.read_block_document_by_name(name=BLOCK_NAME, block_type_slug=slug)
                except ObjectNotFound:
                    status[slug] = "not saved"
                    continue
                found[slug] = _validate(cls, doc.data)
                status[slug] = "loaded"
    except PrefectHTTPStatusError as exc:
        raise ConfigError(
            f"could not read the dsh-memory blocks from the Prefect API {url}: HTTP "
            f"{exc.response.status_code}. Check PREFECT_API_URL (and PREFECT_API_KEY/PREFECT_API_AUTH_STRING), "
            f"or set {IGNORE_BLOCKS_ENV}=1 to use the environment only"
        ) from None
    return found.get("dsh-memory-settings"), found.get("dsh-memory-model-route"), status


def _saved_block_slugs(url: str) -> set[str] | None:
    """Which of our "default" block documents exist, by one `POST /block_documents/filter`
    (no prefect import); None when the answer is not usable (the caller then asks through
    Prefect's client). Raises httpx.TransportError when nothing answers (refused, timed out, hung
    up), httpx.HTTPStatusError when a proxy answers for a server that does not (502-504): Prefect's
    client would retry either for minutes."""
    import httpx

    body = {
        "block_types": {"slug": {"any_": list(BLOCK_SLUGS)}},
        "block_documents": {"name": {"any_": [BLOCK_NAME]}, "is_anonymous": {"eq_": False}},
        "include_secrets": False,
        "limit": 10,
    }
    try:
        # Proxies from the environment apply to remote servers only, never to loopback. A plain
        # HTTP URL never uses TLS (redirects are not followed): no CA bundle is loaded for it
        # (50-100 ms of every flow run's start, whose settings are resolved here).
        plain = url.lower().startswith("http://")
        with httpx.Client(timeout=10, trust_env=not is_loopback_url(url), verify=not plain) as client:
            resp = client.post(f"{url}/block_documents/filter", json=body, headers=prefect_auth_headers())
    except httpx.TransportError:
        raise
    except httpx.HTTPError:
        return None
    if resp.status_code == 404:  # a Prefect API has this route: the URL names something else
        raise ConfigError(
            f"PREFECT_API_URL {url} is not a Prefect API (HTTP 404 for its block documents): it usually "
            f"ends in /api (e.g. {url}/api), or set {IGNORE_BLOCKS_ENV}=1 to use the environment only"
        )
    if resp.status_code in (502, 503, 504):
        raise httpx.HTTPStatusError(f"HTTP {resp.status_code}", request=resp.request, response=resp)
    if resp.status_code != 200:
        return None
    try:
        docs = resp.json()
        return {d["block_type"]["slug"] for d in docs if d.get("name") == BLOCK_NAME}
    except (ValueError, TypeError, KeyError):
        return None


def _validate(cls: Any, data: dict[str, Any]) -> Any:
    """A saved block document as a validated block, or ConfigError that says what is wrong
    ('field: message (got value)', secrets never echoed) and how to fix it."""
    from pydantic import ValidationError

    from dsh_memory.blocks._fields import PREFECT_DATA_KEYS

    slug = cls.get_block_type_slug()
    data = {k: v for k, v in (data or {}).items() if k not in PREFECT_DATA_KEYS}
    unknown = sorted(set(data) - set(cls.model_fields))
    if unknown:
        problem = f"it has fields this version does not know ({', '.join(unknown)}): it was saved by another schema"
    else:
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            problem = problems(cls, exc)
    raise ConfigError(
        f"the saved Prefect block '{slug}/{BLOCK_NAME}' is unusable: {problem}. Fix it in the Prefect UI "
        f"under Blocks → {cls.get_block_type_name()} → {BLOCK_NAME}, re-save it from the environment with "
        f"`dsh-memory settings save --from-env`, or delete it with `prefect block delete {slug}/{BLOCK_NAME}` "
        "(the environment and the documented defaults then apply)"
    )


_USERINFO = re.compile(r"\b([a-z][a-z0-9+.-]*://)[^/?#\s'\"<>]*@", re.IGNORECASE)


def shown_url(text: str) -> str:
    """A URL (or a message naming one) to show or link without its user and password
    (`http://u:pw@host/api` → `http://host/api`): basic auth's password is a secret; a browser
    asks for it."""
    return _USERINFO.sub(r"\1", text)


SECRET_MASK = "********"
PRECEDENCE = "block > env > default"


def _no_password(value: Any) -> Any:
    """A URL's password masked (`https://user:pass@host` → `https://user:********@host`): a proxy's
    basic auth is a secret like the API key; any other value as it is."""
    if not isinstance(value, str) or "@" not in value or "://" not in value:
        return value
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(value)
        if parts.password is None:
            return value
        host = parts.netloc.rsplit("@", 1)[1]
        return parts._replace(netloc=f"{parts.username}:{SECRET_MASK}@{host}").geturl()
    except ValueError:
        return SECRET_MASK


def describe_settings(resolved: ResolvedSettings) -> dict[str, Any]:
    """Effective values (block field names) with their source (block / env / default); secrets
    (the API key) only as a mask, never their value. `dsh-memory settings show` and the vault's
    settings page print this."""
    from dsh_memory.blocks.memory_settings import settings_sources, settings_values
    from dsh_memory.blocks.model_route import SECRET_FIELDS, route_sources, route_values

    memory_src = settings_sources(resolved.memory_block)
    route_src = route_sources(resolved.route_block)
    memory = {k: {"value": v, "source": memory_src[k]} for k, v in settings_values(resolved.settings).items()}
    route = {}
    for k, v in route_values(resolved.route).items():
        masked = None if v is None else SECRET_MASK
        route[k] = {"value": masked if k in SECRET_FIELDS else _no_password(v), "source": route_src[k]}
    from dsh_memory.readpath.embedder import describe

    return {
        "precedence": PRECEDENCE,
        "prefect_api_url": _no_password(resolved.api_url),
        "blocks": {f"{slug}/{BLOCK_NAME}": status for slug, status in resolved.blocks.items()},
        "memory": memory,
        "model_route": route,
        "ranked_search": describe(resolved.settings.semantic_search),  # what the semantic_search setting gives here
    }
