"""One small exception hierarchy. Every class carries its CLI `exit_code`, its HTTP `http_status`
and a stable `code` (the `{"error": {"code": …}}` of --json and RPC bodies); a refinement that sets
none shares its parent's. docs/cli.md's exit-code table lists every class (tested).
"""

from __future__ import annotations


class DshMemoryError(Exception):
    """Base class for every error this project raises on purpose."""

    exit_code = 1
    http_status = 500
    code = "error"


class UserInputError(DshMemoryError):
    """Bad input from a user or a client (CLI args, RPC bodies, tool arguments)."""

    exit_code = 2
    http_status = 400
    code = "user_input"


class NotFoundError(DshMemoryError):
    """A named thing (session, file) does not exist."""

    exit_code = 3
    http_status = 404
    code = "not_found"


class PathGuardError(UserInputError):
    """A path tried to leave the memory root or reach a hidden/forbidden file."""

    http_status = 403
    code = "path_guard"


class SessionReadError(DshMemoryError):
    """A session log could not be read. Always names the file and the reason."""

    code = "session_read"

    def __init__(self, path: object, reason: str):
        self.path = str(path)
        self.reason = reason
        super().__init__(f"{self.path}: {reason}")


class ConfigError(DshMemoryError):
    """Settings are missing or invalid; the message says how to fix it."""

    exit_code = 4
    code = "config"


class ServiceUnavailableError(DshMemoryError):
    """A service the command needs does not answer (the Prefect API at PREFECT_API_URL) or cannot
    start (the temporary Prefect server without a home); the message says how to fix it."""

    exit_code = 6
    http_status = 503
    code = "unavailable"


class LLMError(DshMemoryError):
    """Base for model-call failures."""

    http_status = 502
    code = "llm"


class LLMTransientError(LLMError):
    """Worth retrying: 429, 5xx, timeouts, connection resets. `retry_after` in seconds if known."""

    code = "llm_transient"

    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


class LLMFatalError(LLMError):
    """Not worth retrying: auth, bad request, unknown model."""

    code = "llm_fatal"


class LLMTruncatedError(LLMError):
    """The model stopped at max_tokens (finish_reason == "length"). `partial` holds what arrived."""

    code = "llm_truncated"

    def __init__(self, message: str, partial: object = None):
        super().__init__(message)
        self.partial = partial


class LLMOutputError(LLMError):
    """The model answered, but not with the structure we asked for."""

    code = "llm_output"


class NoModelRouteError(ConfigError):
    """No model endpoint is configured (and no local model is available)."""

    code = "no_model_route"
