"""`settings show` (effective values and where each comes from) and `settings save` (as Blocks)."""

from __future__ import annotations

import os
import time
from typing import Any

import typer

from dsh_memory.cli._common import show
from dsh_memory.errors import ConfigError, ServiceUnavailableError


def _print(data: dict) -> None:
    typer.echo(f"precedence: {data['precedence']}    Prefect API: {data['prefect_api_url'] or '-'}")
    for name, status in data["blocks"].items():
        typer.echo(f"block {name}: {status}")
    for title, key in (("memory settings", "memory"), ("model route", "model_route")):
        typer.echo(f"\n{title}:")
        for field, item in data[key].items():
            value = "-" if item["value"] is None else item["value"]
            typer.echo(f"  {field:<26} {str(value):<44} {item['source']}")
    typer.echo(f"\nranked search: {data['ranked_search']}")


def _print_saved(result: dict) -> None:
    for name, fields in result["saved"].items():
        shown = ", ".join(f + (" (secret)" if f == "api_key" else "") for f in fields) or "no fields pinned"
        typer.echo(f"saved {name}: {shown}")
    typer.echo(f"on {result['prefect_api_url']}; empty fields follow the environment, then the defaults")


def _save(from_env: bool, include_defaults: bool) -> dict:
    from prefect.exceptions import PrefectHTTPStatusError
    from prefect.settings import PREFECT_CLIENT_MAX_RETRIES, temporary_settings

    from dsh_memory.settings_loader import prefect_api_url, shown_url

    # Each request once: Prefect's client retries a 502/503 five times, two minutes in all, before
    # the same error (a PREFECT_CLIENT_MAX_RETRIES the user set still applies). A Prefect server
    # whose SQLite database is busy (a loaded machine) answers 503 with its own body: the save, an
    # upsert, is made again then, after 1, 2 and 4 s; a proxy's 503 (its server down) is not.
    retries = {} if "PREFECT_CLIENT_MAX_RETRIES" in os.environ else {PREFECT_CLIENT_MAX_RETRIES: 0}
    try:
        for delay in (1, 2, 4, None):
            try:
                with temporary_settings(updates=retries):
                    return _save_blocks(from_env, include_defaults)
            except PrefectHTTPStatusError as exc:
                if delay is None or not _busy(exc.response):
                    raise
                time.sleep(delay)
        raise AssertionError("unreachable")
    except PrefectHTTPStatusError as exc:  # a protected server without credentials, or not Prefect
        url, status = shown_url(prefect_api_url(profile=True) or ""), exc.response.status_code
        if status in (502, 503, 504):  # a proxy for a server that is down or starting
            raise ServiceUnavailableError(
                f"the Prefect API at {url} does not answer (HTTP {status}): start it "
                "(`prefect server start`, or `dsh-memory serve`) and save again"
            ) from None
        raise ConfigError(
            f"could not save the dsh-memory blocks on the Prefect API {url}: HTTP "
            f"{status}. Check PREFECT_API_URL (and PREFECT_API_KEY/PREFECT_API_AUTH_STRING)"
        ) from None


def _busy(response: Any) -> bool:
    """A Prefect server's own 503 (a database error it says to retry), not a proxy's."""
    try:
        return response.status_code == 503 and response.json() == {"exception_message": "Service Unavailable"}
    except ValueError:
        return False


def _save_blocks(from_env: bool, include_defaults: bool) -> dict:
    import prefect.settings  # noqa: F401  (makes the active profile's PREFECT_API_URL visible)
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import BlockDocumentUpdate

    from dsh_memory.blocks import MemorySettingsBlock, ModelRouteBlock, register_blocks
    from dsh_memory.blocks._fields import PREFECT_DATA_KEYS
    from dsh_memory.blocks.memory_settings import settings_sources, settings_values
    from dsh_memory.blocks.model_route import route_sources, route_values
    from dsh_memory.settings_loader import BLOCK_NAME, check_api_url, prefect_api_url, resolve_settings, shown_url

    url = check_api_url(prefect_api_url(profile=True))
    if not url:
        raise ConfigError(
            "no Prefect server configured, so there is nowhere to save blocks: run `dsh-memory serve`, "
            "or `prefect server start` and set PREFECT_API_URL=http://127.0.0.1:4200/api "
            "(until then settings come from the environment and the defaults)"
        )
    register_blocks()
    r = resolve_settings(use_blocks=not from_env)
    unread = next((s for s in r.blocks.values() if s.startswith("not consulted")), None)
    if not from_env and unread:  # saving would overwrite the blocks with the environment alone
        raise ConfigError(
            f"the saved blocks were {unread}: saving now would drop the values they hold "
            "(--from-env rebuilds them from the environment and defaults on purpose)"
        )

    def pinned(sources: dict[str, str]) -> set[str] | None:  # None: every field
        return None if include_defaults else {k for k, s in sources.items() if s != "default"}

    blocks = (  # both validated before either is saved
        MemorySettingsBlock.holding(settings_values(r.settings), only=pinned(settings_sources(r.memory_block))),
        ModelRouteBlock.holding(route_values(r.route), only=pinned(route_sources(r.route_block))),
    )
    saved = {}
    for block in blocks:
        cls = type(block)
        block.save(BLOCK_NAME, overwrite=True)
        with get_client(sync_client=True) as client:  # the merged document, with secrets
            doc = client.read_block_document_by_name(BLOCK_NAME, cls.get_block_type_slug())
            # `save(overwrite=True)` merges into the old document: drop keys another schema left there.
            data = {k: v for k, v in doc.data.items() if k in cls.model_fields or k in PREFECT_DATA_KEYS}
            if data != doc.data:
                client.update_block_document(doc.id, BlockDocumentUpdate(data=data, merge_existing_data=False))
        saved[f"{block.get_block_type_slug()}/{BLOCK_NAME}"] = [
            k for k in cls.model_fields if getattr(block, k) is not None
        ]
    return {"prefect_api_url": shown_url(url), "saved": saved}


def register(app: typer.Typer) -> None:
    settings_app = typer.Typer(
        help="Show or save the settings flows run with (Prefect Blocks > environment > defaults).",
        no_args_is_help=True,
    )
    app.add_typer(settings_app, name="settings", rich_help_panel="Admin")

    @settings_app.command("show")
    def show_cmd(
        as_json: bool = typer.Option(False, "--json", help="Print as JSON."),
    ) -> None:
        """Print the effective settings and the source of each value (block, env or default).

        The API key is never printed, only whether one is set, nor a password in a URL.
        """

        def go() -> dict:
            import prefect.settings  # noqa: F401  (makes the active profile's PREFECT_API_URL visible)

            from dsh_memory.settings_loader import describe_settings, resolve_settings

            return describe_settings(resolve_settings())

        show(go, as_json, _print)

    @settings_app.command("save")
    def save_cmd(
        from_env: bool = typer.Option(
            False, "--from-env", help="Ignore the saved blocks: rebuild them from the environment and defaults."
        ),
        include_defaults: bool = typer.Option(
            False, "--include-defaults", help="Also pin fields that are at their default (otherwise left empty)."
        ),
        as_json: bool = typer.Option(False, "--json", help="Print what was saved as JSON."),
    ) -> None:
        """Save the effective values as the "default" blocks (registers the block types first).

        Values from the environment and existing blocks are pinned; fields at their default stay empty.

        Needs a Prefect server (PREFECT_API_URL, or a running `serve`).
        """
        show(lambda: _save(from_env, include_defaults), as_json, _print_saved)
