"""The deployments in prefect.yaml (the one source of truth), with the effective settings'
turn-end trigger window (`debounce_seconds`) and schedule intervals applied. Two modes, never
sharing a deployment name:
- `serve`: the main pool's deployments under their yaml names (`catch-up/catch-up`…), run by the
  serving process itself;
- `deploy`: every deployment as its yaml name + `-pool` (`catch-up/catch-up-pool`…), run by
  `prefect worker start`; `extract-transcripts` (the pure Phase 1 step) exists only here.
  `dsh-memory deploy` (`deploy()`; docs/running.md, "Work pools: deploy") creates the missing work
  pools, then applies every deployment with the effective settings (again: updated in place).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dsh_memory.errors import ConfigError, NotFoundError, ServiceUnavailableError
from dsh_memory.serve.stack_state import running_stack
from dsh_memory.settings import MemorySettings
from dsh_memory.settings_loader import prefect_api_url, shown_url

CATCH_UP = "catch-up/catch-up"
EXTRACT_SESSION = "extract-session/extract-session"
CONSOLIDATE = "consolidate/consolidate"
EXTRACT_TRANSCRIPTS = "extract-transcripts/extract-transcripts"

MAIN_POOL = "dsh-memory"  # deployments that need the memory root: serve runs them, or workers beside it
EXTRACT_POOL = "dsh-memory-extract"  # the pure Phase 1 step: workers on any machine
POOL_SUFFIX = "-pool"  # `deploy` mode's deployment names: the yaml name + this

# The setting that replaces a deployment's yaml schedule interval.
INTERVAL_SETTINGS = {"catch-up": "catch_up_interval_seconds", "consolidate": "consolidate_interval_seconds"}
RESULT_STORAGE_ENV = "PREFECT_RESULTS_DEFAULT_STORAGE_BLOCK"


def prefect_yaml_path() -> Path:
    """prefect.yaml at the project root (editable install / checkout) or inside the package."""
    package = Path(__file__).resolve().parents[1]  # dsh_memory/
    for candidate in (package.parent / "prefect.yaml", package / "prefect.yaml"):
        if candidate.is_file():
            return candidate
    raise ConfigError("prefect.yaml not found next to the dsh_memory package")


def load_spec() -> list[dict[str, Any]]:
    """prefect.yaml's deployments, each a mapping with a `name` and an `entrypoint`; a file that
    cannot be read or parsed, or declares none, is a ConfigError naming it (one line)."""
    import yaml

    path = prefect_yaml_path()
    try:
        doc = yaml.safe_load(path.read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ConfigError(f"{path} cannot be read as YAML: {why}") from None
    deployments = (doc.get("deployments") if isinstance(doc, dict) else None) or []
    if not isinstance(deployments, list) or not deployments:
        raise ConfigError(f"{path} declares no deployments")
    for d in deployments:
        if not (isinstance(d, dict) and isinstance(d.get("name"), str) and isinstance(d.get("entrypoint"), str)):
            raise ConfigError(f"{path}: every deployment needs a name and an entrypoint: {str(d)[:100]}")
    return deployments


def pool_of(spec: dict[str, Any]) -> str:
    return (spec.get("work_pool") or {}).get("name") or MAIN_POOL


def import_entrypoint(entrypoint: str):
    """`flows/extract.py:extract_flow` → the flow object, imported as `dsh_memory.flows.extract`
    (the same module in a checkout and in an installed wheel)."""
    file_part, _, attr = entrypoint.partition(":")
    module = file_part.removesuffix(".py").replace("/", ".")
    try:
        return getattr(importlib.import_module(f"dsh_memory.{module}"), attr)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ConfigError(f"prefect.yaml entrypoint {entrypoint!r} is not one of dsh-memory's flows ({exc})") from None


def build(spec: dict[str, Any], settings: MemorySettings | None, *, suffix: str = "", job_variables=None):
    """One yaml deployment as a RunnerDeployment named `<yaml name><suffix>`, with the settings'
    debounce window and schedule interval applied (the yaml's values when `settings` is None); a
    deployment prefect.yaml does not describe validly is a ConfigError naming it."""
    from pydantic import ValidationError

    flow = import_entrypoint(spec["entrypoint"])
    try:
        return _build(flow, spec, settings, suffix, job_variables)
    except (TypeError, ValueError, KeyError, AttributeError) as exc:  # a pydantic ValidationError is a ValueError
        errors = exc.errors() if isinstance(exc, ValidationError) else []
        why = f"{'.'.join(map(str, errors[0]['loc']))}: {errors[0]['msg']}" if errors else str(exc).splitlines()[0]
        raise ConfigError(f"prefect.yaml deployment {spec['name']!r} is not valid: {why}") from None


def _build(flow, spec: dict[str, Any], settings: MemorySettings | None, suffix: str, job_variables):
    from prefect.client.schemas.objects import ConcurrencyLimitConfig
    from prefect.deployments.runner import EntrypointType
    from prefect.events.schemas.deployment_triggers import DeploymentEventTrigger

    triggers = []
    for t in spec.get("triggers") or []:
        t = {k: v for k, v in t.items() if k != "type"}
        if settings is not None and t.get("posture") == "Reactive":
            # fires at most once per debounce: a turn end it lets pass is seen by the run that
            # debounce later (flows/extract_session.py)
            t["within"] = max(1, int(settings.debounce_seconds))
        triggers.append(DeploymentEventTrigger(**t))
    intervals = [s["interval"] for s in spec.get("schedules") or [] if "interval" in s]
    setting = INTERVAL_SETTINGS.get(spec["name"])
    if settings is not None and setting and intervals:
        intervals = [getattr(settings, setting)]
    limit = spec.get("concurrency_limit")
    return flow.to_deployment(
        name=spec["name"] + suffix,
        description=spec.get("description"),
        tags=spec.get("tags"),
        interval=intervals or None,
        triggers=triggers or None,
        concurrency_limit=ConcurrencyLimitConfig(**limit) if isinstance(limit, dict) else limit,
        parameters=spec.get("parameters"),
        job_variables=job_variables,
        # Runs import `dsh_memory.flows.<name>`: the same module from a checkout or a wheel, so a
        # worker needs dsh-memory installed and nothing else (no code storage, no pull steps).
        entrypoint_type=EntrypointType.MODULE_PATH,
    )


def runner_deployments(settings: MemorySettings | None = None) -> list:
    """`serve`'s deployments: the main pool's, under their yaml names."""
    return [build(spec, settings) for spec in load_spec() if pool_of(spec) == MAIN_POOL]


def pool_deployments(
    settings: MemorySettings, pools: dict[str, str], extract_env: dict[str, str] | None = None
) -> list[tuple[Any, str]]:
    """`deploy`'s deployments as (RunnerDeployment, work pool): every yaml deployment named
    `<name>-pool`, on its yaml pool renamed through `pools`; `extract_env` is set on the
    extract pool's runs (e.g. the result storage block workers on other machines must use)."""
    out = []
    for spec in load_spec():
        pool = pool_of(spec)
        env = extract_env if pool == EXTRACT_POOL and extract_env else None
        deployment = build(spec, settings, suffix=POOL_SUFFIX, job_variables={"env": env} if env else None)
        out.append((deployment, pools.get(pool, pool)))
    return out


def ui_url(api_url: str | None) -> str | None:
    """The Prefect UI of an API address (`http://127.0.0.1:4200/api` → `http://127.0.0.1:4200`)."""
    return shown_url(api_url.rstrip("/")).removesuffix("/api") if api_url else None


def start_run(name: str, parameters: dict[str, Any] | None = None) -> dict[str, Any]:
    """Ask the configured Prefect server to run one of our deployments now, without waiting: the
    new flow run's id, name and UI address: `serve`'s deployment `name`, else `deploy`'s
    `name-pool`. ServiceUnavailableError without a (reachable) server; NotFoundError when neither
    is registered."""
    url = prefect_api_url(profile=True)
    if not url:
        raise ServiceUnavailableError(
            "no Prefect server is configured (PREFECT_API_URL is unset), so nothing would run this: "
            "start the stack with `dsh-memory serve`, or run it from the command line"
        )
    import httpx
    from prefect.deployments import run_deployment
    from prefect.exceptions import ObjectNotFound

    shown = shown_url(url)  # in messages: a basic-auth password is no part of them

    for candidate in (name, name + POOL_SUFFIX):  # `serve`'s, else `deploy`'s (work pools, no `serve`)
        try:
            run = run_deployment(candidate, parameters=parameters or {}, timeout=0)
            break
        except ObjectNotFound:
            continue
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            raise ServiceUnavailableError(
                f"the Prefect API at {shown} does not answer ({type(exc).__name__})"
            ) from None
        except httpx.HTTPStatusError as exc:
            raise ServiceUnavailableError(f"the Prefect API at {shown} answered {exc.response.status_code}") from None
        except httpx.HTTPError as exc:  # a timeout, not HTTP at all (after the client's retries)
            raise ServiceUnavailableError(f"the Prefect API at {shown} failed ({type(exc).__name__})") from None
    else:
        raise NotFoundError(
            f"the deployment {name} is not registered on {shown}: `dsh-memory serve` registers it "
            f"(`dsh-memory deploy`: {name}{POOL_SUFFIX})"
        )
    ui = ui_url(url)
    return {"id": str(run.id), "name": run.name, "deployment": candidate, "url": f"{ui}/runs/flow-run/{run.id}"}


def in_this_mode(full_name: str) -> str:
    """`consolidate/consolidate` as the running flow's mode names it: `…-pool` when this run
    belongs to a `deploy` deployment, so a worker's run never starts one of `serve`'s."""
    from prefect.runtime import deployment

    current = deployment.name or ""
    return full_name + POOL_SUFFIX if current.endswith(POOL_SUFFIX) else full_name


@dataclass
class DeployReport:
    api_url: str
    pools_created: list[str] = field(default_factory=list)
    pools: list[str] = field(default_factory=list)
    deployments: list[str] = field(default_factory=list)  # "flow/deployment"
    worker_commands: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def check_result_storage(client, slug: str) -> None:
    """`local-file-system/name`, `s3-bucket/name`…: a saved block that reads and writes files, or
    a clear error."""
    from prefect.exceptions import ObjectNotFound

    block_type, _, name = slug.partition("/")
    if not block_type or not name:
        raise ConfigError(f"--result-storage {slug!r}: expected BLOCK-TYPE/NAME, e.g. local-file-system/dsh-results")
    try:
        block = client.read_block_document_by_name(name=name, block_type_slug=block_type)
    except ObjectNotFound:
        raise ConfigError(
            f"--result-storage {slug!r}: no such block on this Prefect server; create it first "
            "(docs/running.md: Workers on other machines)"
        ) from None
    can = set(block.block_schema.capabilities if block.block_schema else [])
    if not {"read-path", "write-path"} <= can:  # workers could not write their results to it
        raise ConfigError(
            f"--result-storage {slug!r}: not a storage block (one that reads and writes files, e.g. "
            "local-file-system, remote-file-system, s3-bucket)"
        )


def _pool_create(name: str, limit: int | None):
    """A process work pool to create, or ConfigError naming the option (`--pool a/b`)."""
    from prefect.client.schemas.actions import WorkPoolCreate
    from pydantic import ValidationError

    try:
        return WorkPoolCreate(name=name, type="process", concurrency_limit=limit)
    except ValidationError:
        raise ConfigError(
            f"work pool name {name!r} (--pool / --extract-pool) is not valid: it must be non-empty, without / % & > <"
        ) from None


def deploy(
    settings: MemorySettings,
    *,
    pool: str = MAIN_POOL,
    extract_pool: str = EXTRACT_POOL,
    result_storage: str | None = None,
    extract_only: bool = False,
) -> DeployReport:
    """Pools, then deployments (`dsh-memory deploy`, see the module doc). `extract_only`: the extract pool and
    extract-transcripts alone — for a `serve` host whose Phase 1 extracts on workers."""
    from httpx import HTTPError
    from prefect import get_client
    from prefect.exceptions import ObjectAlreadyExists
    from prefect.settings import get_current_settings

    api_url = get_current_settings().api.url or ""
    if not api_url:
        raise ConfigError(
            "deploy needs a Prefect server: set PREFECT_API_URL (a `prefect server start`, or the one "
            "`dsh-memory serve` started)"
        )
    if not extract_only:
        stack = running_stack()
        if stack is not None and stack.api_url.rstrip("/") == api_url.rstrip("/"):
            # Both modes on one server: every turn end would also start a pool run no worker serves.
            raise ConfigError(
                f"`dsh-memory serve` runs on {api_url} ({stack.where()}) and already runs catch-up, "
                "extract-session and consolidate: deploy only the extract pool there with --extract-only, "
                "or deploy to another Prefect server (one mode per server, docs/running.md)"
            )
    report = DeployReport(api_url=api_url)
    pools = {MAIN_POOL: pool, EXTRACT_POOL: extract_pool}
    wanted = [extract_pool] if extract_only else list(dict.fromkeys(pools.values()))
    # The main pool runs this host's flows: the bound `serve` applies to itself (flow_run_limit).
    # Extract workers may be many machines: no pool-wide bound. Built first: a bad name is one line.
    creates = {name: _pool_create(name, settings.flow_run_limit if name == pool else None) for name in wanted}
    env = {RESULT_STORAGE_ENV: result_storage} if result_storage else None
    # Built before the server is touched: a prefect.yaml that does not build changes nothing there.
    built = [(d, p) for d, p in pool_deployments(settings, pools, extract_env=env) if p in wanted]
    try:
        with get_client(sync_client=True) as client:
            if result_storage:
                check_result_storage(client, result_storage)
            for name, create in creates.items():
                limit = create.concurrency_limit
                try:  # an existing pool is left as it is
                    client.create_work_pool(create)
                    report.pools_created.append(name)
                except ObjectAlreadyExists:
                    existing = client.read_work_pool(name)
                    if existing.type != create.type:  # `prefect worker start --type process` would not serve it
                        raise ConfigError(
                            f"work pool {name} exists with type {existing.type!r}, not {create.type!r}: "
                            "deploy to another pool (--pool / --extract-pool) or delete that one"
                        ) from None
                    has = existing.concurrency_limit
                    if has != limit and limit is not None:
                        kept = "no concurrency limit" if has is None else f"its concurrency limit {has}"
                        report.notes.append(
                            f"work pool {name} keeps {kept} (flow_run_limit is {limit}): "
                            f"prefect work-pool set-concurrency-limit {name} {limit}"
                        )
                report.pools.append(name)
        for deployment, work_pool in built:
            deployment.apply(work_pool_name=work_pool)
            report.deployments.append(f"{deployment.flow_name}/{deployment.name}")
    except (HTTPError, OSError) as exc:
        raise ServiceUnavailableError(f"the Prefect API at {api_url} did not answer: {exc}") from None
    report.worker_commands = [f"prefect worker start --pool {p} --type process" for p in report.pools]
    if not result_storage:
        report.notes.append(
            f"extract-transcripts runs keep their results in each worker's local storage: workers of "
            f"{extract_pool} on other machines need --result-storage (docs/running.md: Workers on other machines)"
        )
    return report
