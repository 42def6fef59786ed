"""The one real LLM client: OpenAI-compatible chat completions over httpx (DeepSeek by default,
OpenAI, Ollama, vLLM, llama.cpp server). It POSTs `{base_url}/chat/completions` as given.

With `tool`, the request forces a call to it (`tool_choice`) and `complete()` returns exactly
one parsed tool call or raises; a model that answers in text is parsed leniently.

Reasoning effort (resolved once per client, `_Caps`): DeepSeek (host *.deepseek.com or
`flavor="deepseek"`) gets `thinking:{type:disabled}` for `off`, else `thinking:{type:enabled}` +
`reasoning_effort`; its thinking mode rejects a forced `tool_choice` (HTTP 400), so the tool is
forced only when thinking is known to be off. Others get `reasoning_effort` only for models known
(o-series, gpt-5) or reported by GET /models to support it (a lookup of 5 s at most as a whole: one
that fails or times out means none, with a note). "" sends nothing; an unsupported value degrades
to the provider default, with a note. An endpoint that answers 400 mentioning
`tool_choice` is retried once without it (remembered).

Errors are classified in `_http_error` / `_post` only. The API key lives only in the
Authorization header: never in a message, a note or a repr.
"""

from __future__ import annotations

import email.utils
import re
import threading
import time
from contextlib import AbstractContextManager, suppress
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx
from pydantic import SecretStr

from dsh_memory import cancel
from dsh_memory.errors import LLMError, LLMFatalError, LLMTransientError, LLMTruncatedError
from dsh_memory.llm.base import Completion, ToolCall, ToolSpec, Usage, output_error, partial_call
from dsh_memory.llm.parse import extract_json_object, loads_lenient
from dsh_memory.transcript.redact import redact

DEEPSEEK_EFFORTS = ("off", "low", "high", "max")
OPENAI_EFFORTS = ("minimal", "low", "medium", "high")
# Requested id → closest id of the family (DeepSeek's own documented mapping; OpenAI by analogy).
_ALIASES = {
    "deepseek": {"minimal": "low", "medium": "high", "xhigh": "high", "ultra": "max", "none": "off"},
    "openai": {"off": "minimal", "none": "minimal", "max": "high", "xhigh": "high", "ultra": "high"},
}
_OPENAI_REASONING = re.compile(r"^(o\d|gpt-5)", re.IGNORECASE)
_METADATA_TIMEOUT_SECONDS = 5.0
_MESSAGE_CHARS = 500
MAX_ANSWER_BYTES = 16 << 20  # the longest answer max_tokens (131072) allows is a few MiB


@dataclass
class _Caps:
    """What this client's model accepts; resolved once (table, then optional GET /models)."""

    family: str  # "deepseek" | "openai" | "generic"
    efforts: tuple[str, ...] = ()
    thinking_default: bool = False  # DeepSeek: thinking on unless disabled (blocks forced tool_choice)
    notes: list[str] = field(default_factory=list)


def _table_caps(flavor: str, model: str) -> _Caps | None:
    m = model.lower()
    if flavor == "deepseek":
        if m == "deepseek-chat":  # legacy non-thinking alias
            return _Caps("deepseek", ("off",), thinking_default=False)
        if m == "deepseek-reasoner":  # legacy always-thinking alias: no effort control
            return _Caps("deepseek", (), thinking_default=True)
        return _Caps("deepseek", DEEPSEEK_EFFORTS, thinking_default=True)
    if flavor == "openai":
        return _Caps("openai", OPENAI_EFFORTS if _OPENAI_REASONING.match(m) else ())
    return None  # generic: ask the endpoint's metadata


def _metadata_efforts(entry: dict) -> tuple[str, ...] | None:
    """Effort ids a GET /models entry reports, in any of the shapes seen in the wild."""
    reasoning = entry.get("reasoning")
    if isinstance(reasoning, dict) and isinstance(reasoning.get("efforts"), list):
        ids = [e.get("id") if isinstance(e, dict) else e for e in reasoning["efforts"]]
        return tuple(str(i) for i in ids if i)
    for key in ("supported_reasoning_efforts", "reasoning_efforts"):
        if isinstance(entry.get(key), list):
            return tuple(str(i) for i in entry[key] if i)
    params = entry.get("supported_parameters")
    if isinstance(params, list) and ("reasoning_effort" in params or "reasoning" in params):
        return OPENAI_EFFORTS
    return None


def retry_after_seconds(headers: httpx.Headers) -> float | None:
    """Retry-After as seconds (delta-seconds or HTTP date), or retry-after-ms; None if absent/bad."""
    ms = headers.get("retry-after-ms")
    if ms:
        with suppress(ValueError):
            return max(0.0, float(ms) / 1000.0)
    value = (headers.get("retry-after") or "").strip()
    if not value:
        return None
    with suppress(ValueError):
        return max(0.0, float(value))
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


class OpenAICompatLLM(AbstractContextManager):
    """`LLM` over an OpenAI-compatible `/chat/completions`. Safe to share across threads."""

    provider = "openai"

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: SecretStr | str | None = None,
        *,
        timeout_seconds: float = 120.0,
        deadline_seconds: float | None = None,
        flavor: str | None = None,
        metadata_lookup: bool = True,
    ):
        self.base_url = base_url.rstrip("/")
        self.model = model
        host = (urlsplit(self.base_url).hostname or "").lower()
        if flavor is None:
            flavor = (
                "deepseek" if host.endswith("deepseek.com") else "openai" if host.endswith("openai.com") else "generic"
            )
        if flavor not in ("deepseek", "openai", "generic"):
            raise ValueError(f"unknown flavor {flavor!r} (deepseek, openai, generic)")
        self.flavor = flavor
        self.timeout_seconds = timeout_seconds
        self.deadline_seconds = deadline_seconds
        self._key = api_key if isinstance(api_key, SecretStr) or api_key is None else SecretStr(api_key)
        self._metadata_lookup = metadata_lookup
        self._caps: _Caps | None = None
        self._lock = threading.Lock()
        self._force_tool_choice = True  # turned off once an endpoint rejects a forced choice
        headers = {"Accept": "application/json", "User-Agent": "dsh-memory"}
        if self._key is not None and self._key.get_secret_value():
            headers["Authorization"] = f"Bearer {self._key.get_secret_value()}"
        self._client = httpx.Client(
            headers=headers,
            trust_env=host not in ("localhost", "127.0.0.1", "::1"),  # no proxy for loopback servers
            timeout=httpx.Timeout(timeout_seconds),
            # No cap on connections in use: a call given up at its deadline leaves its thread
            # reading until the endpoint's trickle ends or the read timeout, and capped
            # connections held so would leave later calls waiting for a slot past their deadline.
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=32),
        )

    def __repr__(self) -> str:  # no key, ever
        return f"OpenAICompatLLM(base_url={self.base_url!r}, model={self.model!r}, flavor={self.flavor!r})"

    def close(self) -> None:
        self._client.close()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- errors (the one place) ------------------------------------------------------------

    def _scrub(self, text: str) -> str:
        key = self._key.get_secret_value() if self._key is not None else ""
        return text.replace(key, "***") if key and len(key) >= 4 else text

    def _http_error(self, response: httpx.Response) -> LLMError:
        status = response.status_code
        try:  # the provider's own message, from its usual JSON shapes
            err = response.json()
        except ValueError:
            err = response.text.strip()
        err = err.get("error", err) if isinstance(err, dict) else err
        if isinstance(err, dict):
            err = err.get("message") or err.get("detail") or err.get("msg") or err
        shown = redact(self._scrub(str(err)))[:_MESSAGE_CHARS]  # it reaches Prefect's run logs as raised
        msg = self._scrub(f"HTTP {status} from {self.base_url} (model {self.model}): {shown}")
        if status in (408, 409, 425, 429) or status >= 500:
            return LLMTransientError(msg, retry_after=retry_after_seconds(response.headers))
        return LLMFatalError(msg)

    def _post(self, url: str, body: dict) -> httpx.Response:
        try:
            # Ctrl-C / SIGTERM stops the wait for the answer (a call can take minutes), and so
            # does the deadline: headers that trickle in never reach `_read_answer`'s own check.
            return cancel.interruptible(lambda: self._read_answer(url, body), self.deadline_seconds)
        except cancel.Overdue:
            raise self._overdue() from None
        except httpx.HTTPError as exc:  # no answer: transient
            kind = "timeout" if isinstance(exc, httpx.TimeoutException) else "connection error"
            raise LLMTransientError(
                self._scrub(f"{kind} calling {self.base_url} ({type(exc).__name__}: {exc})")
            ) from None

    def _read_answer(self, url: str, body: dict) -> httpx.Response:
        """The answer, read as it arrives: `timeout_seconds` bounds each wait for bytes,
        MAX_ANSWER_BYTES its size, and `deadline_seconds` the whole call (`_post` stops waiting
        then): an endpoint that keeps the connection alive with blank lines while it thinks
        (DeepSeek) would otherwise hold it for ever. Past the deadline, the next bytes that arrive
        end the read and close the connection."""
        started, size = time.monotonic(), 0
        with self._client.stream("POST", url, json=body) as r:
            parts = []
            for part in r.iter_raw():
                parts.append(part)
                size += len(part)
                if size > MAX_ANSWER_BYTES:  # an endpoint that never stops would fill memory
                    raise LLMFatalError(
                        f"the answer from {self.base_url} passed {MAX_ANSWER_BYTES >> 20} MiB: not read"
                    )
                if self.deadline_seconds is not None and time.monotonic() - started > self.deadline_seconds:
                    raise self._overdue()  # hangs up (the caller stopped waiting at the deadline)
            return httpx.Response(r.status_code, headers=r.headers, content=b"".join(parts), request=r.request)

    def _overdue(self) -> LLMTransientError:
        """Transient, but not to be tried again at once: its `retry_after` (the deadline) is past
        the task's retry delays, so the run does not hold its lock for another deadline each time
        (the claim's backoff, or Phase 2's next trigger, tries again)."""
        return LLMTransientError(
            f"no complete answer from {self.base_url} within {self.deadline_seconds:g} s "
            "(the call's deadline, setting call_deadline_seconds)",
            retry_after=self.deadline_seconds,
        )

    # -- capabilities ------------------------------------------------------------------------

    def capabilities(self) -> _Caps:
        """Resolve (once) which efforts the model accepts. Never raises."""
        with self._lock:
            if self._caps is None:
                self._caps = _table_caps(self.flavor, self.model) or self._lookup_caps()
            return self._caps

    def _lookup_caps(self) -> _Caps:
        caps = _Caps("generic")
        if not self._metadata_lookup:
            return caps
        # Bounded as a whole, as a call is: an endpoint trickling its answer would hold the first
        # call (and, behind the lock, every other) for as long as it trickled.
        bound = min(_METADATA_TIMEOUT_SECONDS, self.timeout_seconds, self.deadline_seconds or _METADATA_TIMEOUT_SECONDS)
        try:
            r = cancel.interruptible(lambda: self._client.get(f"{self.base_url}/models", timeout=bound), bound)
            r.raise_for_status()
            data = r.json()
            entries = data.get("data", []) if isinstance(data, dict) else data
            for entry in entries if isinstance(entries, list) else []:
                if isinstance(entry, dict) and entry.get("id") == self.model:
                    caps.efforts = _metadata_efforts(entry) or ()
                    break
        except cancel.Overdue:
            caps.notes.append(f"model metadata unavailable (no answer within {bound:g} s)")
        except Exception as exc:  # metadata is advisory: it never fails a call
            caps.notes.append(self._scrub(f"model metadata unavailable ({type(exc).__name__})"))
        return caps

    def resolve_effort(self, requested: str) -> tuple[str, list[str]]:
        """(effort to apply or "" for the provider default, notes). Never raises."""
        requested = (requested or "").strip().lower()
        if not requested:
            return "", []
        caps = self.capabilities()
        notes = list(caps.notes)
        if requested in caps.efforts:
            return requested, notes
        alias = _ALIASES[caps.family if caps.family != "generic" else "openai"].get(requested)
        if alias in caps.efforts:
            return alias, [*notes, f"effort {requested!r} mapped to {alias!r}"]
        supported = "/".join(caps.efforts) or "none"
        notes.append(f"effort {requested!r} unsupported by {self.model} (supported: {supported}) → provider default")
        return "", notes

    # -- the call ----------------------------------------------------------------------------

    def complete(
        self,
        messages: list[dict[str, Any]],
        *,
        tool: ToolSpec | None = None,
        max_tokens: int = 4096,
        reasoning_effort: str = "",
        temperature: float | None = None,
    ) -> Completion:
        effort, notes = self.resolve_effort(reasoning_effort)
        # Table lookups are free; only a generic endpoint asked for an effort costs a GET /models.
        caps = self.capabilities() if (effort or self.flavor != "generic") else _Caps("generic")
        body: dict[str, Any] = {"model": self.model, "messages": messages, "max_tokens": max_tokens, "stream": False}
        if temperature is not None and caps.family == "openai" and caps.efforts:
            notes.append("temperature dropped: OpenAI reasoning models reject it")
        elif temperature is not None:
            body["temperature"] = temperature
        thinking = caps.thinking_default
        if effort and caps.family == "deepseek":
            thinking = effort != "off"
            body["thinking"] = {"type": "enabled" if thinking else "disabled"}
        if effort and (thinking or caps.family != "deepseek"):  # DeepSeek takes an effort only when thinking
            body["reasoning_effort"] = effort
        if tool is not None:
            body["tools"] = [{"type": "function", "function": tool.model_dump()}]
            if thinking:
                notes.append("tool_choice not forced: DeepSeek thinking mode rejects it")
            elif self._force_tool_choice:
                body["tool_choice"] = {"type": "function", "function": {"name": tool.name}}
        url = f"{self.base_url}/chat/completions"
        response = self._post(url, body)
        if response.status_code == 400 and "tool_choice" in body and "tool_choice" in response.text:
            self._force_tool_choice = False  # remembered for this client
            body.pop("tool_choice")
            notes.append("endpoint rejected forced tool_choice; retried with auto")
            response = self._post(url, body)
        if response.status_code >= 400:
            raise self._http_error(response)
        return self._parse(response, tool, effort, notes)

    def _parse(self, response: httpx.Response, tool: ToolSpec | None, effort: str, notes: list[str]) -> Completion:
        try:  # a field of the wrong type (pydantic's message would quote the answer) or nested too far
            data = response.json()
            choice = data["choices"][0]
            message = choice.get("message") or {}
            usage = data.get("usage") or {}
            completion = Completion(
                text=message.get("content") or "",
                finish_reason=choice.get("finish_reason"),
                usage=Usage(
                    input_tokens=int(usage.get("prompt_tokens") or 0),
                    output_tokens=int(usage.get("completion_tokens") or 0),
                ),
                model=data.get("model") or self.model,
                provider=self.provider,
                reasoning_effort=effort,
                notes=notes,
            )
            raw_calls = message.get("tool_calls") or []
            if not isinstance(raw_calls, list):
                raise TypeError
            fns = [c.get("function") or {} if isinstance(c, dict) else {} for c in raw_calls]
            # the call of the tool asked for (a model may call another first), else the first
            fn = next(
                (f for f in fns if isinstance(f, dict) and tool and f.get("name") == tool.name), fns[0] if fns else {}
            )
            if not isinstance(fn, dict) or not isinstance(fn.get("name") or "", str):
                raise TypeError
        except (ValueError, KeyError, IndexError, TypeError, AttributeError, RecursionError):
            raise LLMTransientError(f"malformed response from {self.base_url}: not a chat completion") from None
        if completion.finish_reason == "length":
            raw = fn.get("arguments")
            if isinstance(raw, str) and raw.strip():
                name = fn.get("name") or (tool.name if tool else "")
                completion.tool_calls = [partial_call(name, raw, completion.notes)]
            elif tool is not None and (args := _text_fallback(completion.text, tool)) is not None:
                completion.tool_calls = [ToolCall(name=tool.name, arguments=args)]
            raise LLMTruncatedError(
                f"{self.model} stopped at max_tokens ({completion.usage.output_tokens} output tokens)",
                partial=completion,
            )
        if completion.finish_reason == "insufficient_system_resource":
            raise LLMTransientError(f"{self.model}: provider reported insufficient_system_resource")
        if completion.finish_reason == "content_filter":
            raise output_error(f"{self.model}: answer withheld by the provider's content filter", completion)
        if tool is None:
            return completion
        call = self._tool_call(fn, tool, completion)
        if call is None:
            what = "unparseable tool arguments" if fn else "no tool call"
            raise output_error(f"{self.model} answered with {what} and no JSON fallback for {tool.name}", completion)
        completion.tool_calls = [call]
        return completion

    def _tool_call(self, fn: dict, tool: ToolSpec, completion: Completion) -> ToolCall | None:
        name = fn.get("name") or tool.name
        raw = fn.get("arguments")
        if isinstance(raw, dict):  # some servers (older Ollama) send an object
            return ToolCall(name=name, arguments=raw)
        if isinstance(raw, str) and raw.strip():
            try:
                args = loads_lenient(raw)
            except ValueError:
                args = extract_json_object(raw)
            if isinstance(args, dict):
                return ToolCall(name=name, arguments=args, raw_arguments=raw)
        args = _text_fallback(completion.text, tool)
        if args is None:
            return None
        completion.notes.append("tool arguments recovered from text content")
        return ToolCall(name=tool.name, arguments=args)


def _text_fallback(text: str, tool: ToolSpec) -> dict | None:
    """Tool arguments from a text answer: prefer an object with every required field."""
    if not text:
        return None
    required = set(tool.parameters.get("required") or [])

    def unwrap(obj: dict) -> dict:
        inner = obj.get("arguments", obj.get("parameters"))
        if obj.get("name") == tool.name and isinstance(inner, dict):
            return inner
        return obj

    found = extract_json_object(text, accept=lambda o: required <= set(unwrap(o)))  # no required field: any object
    return unwrap(found) if found is not None else None
