"""The deployments in prefect.yaml as runner deployments for `dsh-memory serve`.

prefect.yaml is the one source of truth: names, entrypoints, schedules, triggers and the
consolidation concurrency limit are read from it; settings may override the debounce window
(`debounce_seconds`) of the turn-end trigger.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from dsh_memory.errors import ConfigError

CATCH_UP = "catch-up/catch-up"
EXTRACT_SESSION = "extract-session/extract-session"
CONSOLIDATE = "consolidate/consolidate"


def prefect_yaml_path() -> Path:
    """prefect.yaml at the project root (editable install / checkout) or inside the package."""
    package = Path(__file__).resolve().parents[1]  # dsh_memory/
    for candidate in (package.parent / "prefect.yaml", package / "prefect.yaml"):
        if candidate.is_file():
            return candidate
    raise ConfigError("prefect.yaml not found next to the dsh_memory package")


def load_spec(path: Path | None = None) -> list[dict[str, Any]]:
    import yaml

    data = yaml.safe_load((path or prefect_yaml_path()).read_text())
    deployments = data.get("deployments") or []
    if not isinstance(deployments, list) or not deployments:
        raise ConfigError(f"{path or prefect_yaml_path()} declares no deployments")
    return deployments


def import_entrypoint(entrypoint: str):
    """`flows/extract.py:extract_flow` → the flow object, imported as `dsh_memory.flows.extract`
    (the same module in a checkout and in an installed wheel)."""
    file_part, _, attr = entrypoint.partition(":")
    module = file_part.removesuffix(".py").replace("/", ".")
    return getattr(importlib.import_module(f"dsh_memory.{module}"), attr)


def runner_deployments(debounce_seconds: int | None = None) -> list:
    """RunnerDeployments for `prefect.serve`, built from prefect.yaml."""
    from prefect.client.schemas.objects import ConcurrencyLimitConfig
    from prefect.deployments.runner import EntrypointType
    from prefect.events.schemas.deployment_triggers import DeploymentEventTrigger

    out = []
    for spec in load_spec():
        flow = import_entrypoint(spec["entrypoint"])
        triggers = []
        for t in spec.get("triggers") or []:
            t = {k: v for k, v in t.items() if k != "type"}
            if debounce_seconds is not None and t.get("posture") == "Proactive":
                t["within"] = debounce_seconds
            triggers.append(DeploymentEventTrigger(**t))
        intervals = [s["interval"] for s in spec.get("schedules") or [] if "interval" in s]
        limit = spec.get("concurrency_limit")
        out.append(
            flow.to_deployment(
                name=spec["name"],
                description=spec.get("description"),
                tags=spec.get("tags"),
                interval=intervals or None,
                triggers=triggers or None,
                concurrency_limit=ConcurrencyLimitConfig(**limit) if isinstance(limit, dict) else limit,
                parameters=spec.get("parameters"),
                # Runs import `dsh_memory.flows.<name>`: the same module from a checkout or a wheel.
                entrypoint_type=EntrypointType.MODULE_PATH,
            )
        )
    return out


def ui_url(api_url: str | None) -> str | None:
    """The Prefect UI of an API address (`http://127.0.0.1:4200/api` → `http://127.0.0.1:4200`)."""
    return api_url.rstrip("/").removesuffix("/api") if api_url else None


def start_run(name: str, parameters: dict[str, Any] | None = None) -> dict[str, Any]:
    """Ask the configured Prefect server to run one of our deployments now, without waiting (what
    the boot catch-up and the turn-end trigger do): the new flow run's id, name and UI address.
    ServiceUnavailableError when no Prefect server is configured (nothing would run it) or it does
    not answer; NotFoundError when the deployment is not registered (no `dsh-memory serve`)."""
    from dsh_memory.errors import NotFoundError, ServiceUnavailableError
    from dsh_memory.settings_loader import prefect_api_url

    url = prefect_api_url(profile=True)
    if not url:
        raise ServiceUnavailableError(
            "no Prefect server is configured (PREFECT_API_URL is unset), so nothing would run this: "
            "start the stack with `dsh-memory serve`, or run it from the command line"
        )
    import httpx
    from prefect.deployments import run_deployment
    from prefect.exceptions import ObjectNotFound

    try:
        run = run_deployment(name, parameters=parameters or {}, timeout=0)
    except ObjectNotFound:
        raise NotFoundError(
            f"the deployment {name} is not registered on {url}: `dsh-memory serve` registers it"
        ) from None
    except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
        raise ServiceUnavailableError(f"the Prefect API at {url} does not answer ({type(exc).__name__})") from None
    ui = ui_url(url)
    return {"id": str(run.id), "name": run.name, "deployment": name, "url": f"{ui}/runs/flow-run/{run.id}"}
