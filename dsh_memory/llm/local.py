"""Provider "local": a GGUF model run in-process by llama.cpp (through the `cyllama` wheel); how
a call runs, step by step: docs/local-llm.md.

Models load lazily once per file, contexts are cached per (file, threads, context size); a forced
tool call is a grammar (`grammar.py`); sampling cannot loop (`loop_start`); one decode at a time
per process (`_DECODE_LOCK`): two generations sharing 2 cores slow each other down far more than
they gain.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import Any

from dsh_memory import cancel
from dsh_memory.errors import LLMFatalError, LLMTruncatedError
from dsh_memory.llm import grammar
from dsh_memory.llm.base import Completion, ToolCall, ToolSpec, Usage, output_error, partial_call
from dsh_memory.llm.model_files import resolve_model_path
from dsh_memory.llm.parse import loads_lenient, loads_truncated

log = logging.getLogger(__name__)

RUNTIME = "cyllama==0.2.18"
INSTALL_HINT = f"pip install {RUNTIME}  (or: pip install 'dsh-memory[local]')"
DEFAULT_CONTEXT_TOKENS = 8192
DEFAULT_OUTPUT_RESERVE = 1024
DEFAULT_TEMPERATURE = 0.2
SEED = 1234
MIN_OUTPUT_TOKENS = 16
PROGRESS_EVERY_SECONDS = 10.0
# Sampling that cannot loop: a mild repeat penalty over the last tokens, and a loop detector that
# stops the decode when the last LOOP_MIN_CHARS characters already occurred earlier in the answer,
# and trims the answer back to where the repetition began.
REPEAT_PENALTY = 1.1
REPEAT_LAST_N = 64
LOOP_MIN_CHARS = 64
LOOP_CHECK_EVERY = 8

ProgressFn = Callable[[str, int, int], None]  # (stage "prompt"|"generate", done, total)

_DECODE_LOCK = threading.Lock()  # one llama.cpp decode at a time in this process
_CACHE_LOCK = threading.Lock()
_MODELS: dict[str, Any] = {}  # resolved path -> LlamaModel
_CONTEXTS: dict[tuple[str, int, int], Any] = {}  # (path, threads, n_ctx) -> LlamaContext


def _runtime():
    """The llama.cpp binding, imported on first use; a clear error when it is not installed."""
    try:
        import cyllama.llama.llama_cpp as binding
    except Exception as exc:  # ImportError, or the shared library failing to load
        raise LLMFatalError(
            f"the local model runtime is not available ({type(exc).__name__}: {exc}). Install it: {INSTALL_HINT}"
        ) from None
    return binding


def _load_model(path: Path):
    key = str(path)
    with _CACHE_LOCK:
        if key not in _MODELS:
            binding = _runtime()
            binding.disable_logging()  # llama.cpp prints a page per load otherwise
            binding.ggml_backend_load_all()
            params = binding.LlamaModelParams()
            params.n_gpu_layers = 0
            started = time.monotonic()
            try:
                _MODELS[key] = binding.LlamaModel(key, params)
            except Exception as exc:
                raise LLMFatalError(f"llama.cpp could not load {path.name}: {type(exc).__name__}: {exc}") from None
            log.info("local model %s loaded in %.1f s", path.name, time.monotonic() - started)
        return _MODELS[key]


def _context(path: Path, threads: int, n_ctx: int):
    key = (str(path), threads, n_ctx)
    model = _load_model(path)
    with _CACHE_LOCK:
        if key not in _CONTEXTS:
            binding = _runtime()
            params = binding.LlamaContextParams()
            params.n_ctx = n_ctx
            params.n_batch = 512
            params.n_ubatch = 512
            params.n_threads = params.n_threads_batch = threads
            params.no_perf = True
            _CONTEXTS[key] = binding.LlamaContext(model, params)
        return _CONTEXTS[key]


def unload_all() -> None:
    """Drop cached models and contexts (tests; freeing memory). Waits for a running decode."""
    with _DECODE_LOCK, _CACHE_LOCK:
        for obj in [*_CONTEXTS.values(), *_MODELS.values()]:
            with suppress(Exception):  # best effort
                obj.close()
        _CONTEXTS.clear()
        _MODELS.clear()


def _chat_messages(messages: list[dict[str, Any]], tool_text: str | None) -> list[dict[str, str]]:
    """Plain {role, content} messages; the tool instruction is appended to the system message."""
    out: list[dict[str, str]] = []
    for m in messages:
        role = str(m.get("role") or "user")
        content = m.get("content")
        if isinstance(content, list):  # OpenAI content parts
            text = "\n".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
        else:
            text = "" if content is None else str(content)
        for call in m.get("tool_calls") or ():
            fn = call.get("function", {}) if isinstance(call, dict) else {}
            text += f"\n[called {fn.get('name', '?')}({fn.get('arguments', '')})]"
        if role == "developer":
            role = "system"
        if role not in ("system", "user", "assistant", "tool"):
            role = "user"
        out.append({"role": role, "content": text})
    if tool_text:
        if out and out[0]["role"] == "system":
            out[0] = {"role": "system", "content": f"{out[0]['content']}\n\n{tool_text}"}
        else:
            out.insert(0, {"role": "system", "content": tool_text})
    return out


def loop_start(text: str) -> int | None:
    """Where a loop began when the answer ends by repeating itself: the end of the first copy of
    the repeated span (keep `text[:i]`), or None when the last LOOP_MIN_CHARS characters are new."""
    if len(text) < 2 * LOOP_MIN_CHARS:
        return None
    tail_at = len(text) - LOOP_MIN_CHARS
    previous = text.rfind(text[tail_at:], 0, len(text) - 1)  # the nearest earlier copy: the period
    if previous < 0:
        return None
    period = tail_at - previous
    start = tail_at
    while start - period > 0 and text[start - 1] == text[start - 1 - period]:
        start -= 1
    return start


class LocalLLM:
    """The `LLM` seam over an in-process GGUF model. Construction is cheap; loading is lazy."""

    provider = "local"

    def __init__(
        self,
        model_path: Path | str,
        *,
        threads: int = 2,
        context_tokens: int = DEFAULT_CONTEXT_TOKENS,
        output_reserve_tokens: int = DEFAULT_OUTPUT_RESERVE,
    ):
        self.model_path = Path(model_path)
        self.model = self.model_path.name
        self.threads = max(1, int(threads))
        self.context_tokens = int(context_tokens)
        self.output_reserve_tokens = int(output_reserve_tokens)
        self.progress: ProgressFn | None = None  # called with each stage's progress when set

    @classmethod
    def from_route(cls, route) -> LocalLLM:
        """Resolve the model file now (clear error if missing or corrupt); load it on first use."""
        return cls(resolve_model_path(route.model_path), threads=route.local_threads)

    @property
    def max_input_tokens(self) -> int:
        """Prompt tokens a caller may send and still leave `output_reserve_tokens` for the answer."""
        return max(0, self.context_tokens - self.output_reserve_tokens)

    def render_prompt(
        self, messages: list[dict[str, Any]], tool: ToolSpec | None = None, *, max_tokens: int = 512
    ) -> str:
        """The exact prompt text the model sees: with a `tool`, an instruction naming it and its
        bounded schema is appended to the system message; the model's chat template applied (ChatML
        when llama.cpp does not know it)."""
        tool_text = None
        if tool is not None:
            schema = json.dumps(self._bounded(tool, max_tokens), separators=(",", ":"), ensure_ascii=False)
            tool_text = (
                f"Answer by calling the function `{tool.name}`: {tool.description.strip()}\n"
                f"Reply with only the JSON object of its arguments, matching this JSON schema:\n{schema}"
            )
        chat = _chat_messages(messages, tool_text)
        binding, model = _runtime(), _load_model(self.model_path)
        template = model.get_default_chat_template()
        if template:
            try:
                parts = [binding.LlamaChatMessage(role=m["role"], content=m["content"]) for m in chat]
                return model.chat_apply_template(template, parts, True)
            except Exception as exc:  # noqa: BLE001 - template unknown to llama.cpp's built-in list
                log.debug("chat template not applicable (%s); using ChatML", exc)
        return "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in chat) + "<|im_start|>assistant\n"

    def _bounded(self, tool: ToolSpec, max_tokens: int) -> dict[str, Any]:
        return grammar.bound_schema(tool.parameters, max_tokens=max_tokens)

    def complete(
        self,
        messages: list[dict[str, Any]],
        *,
        tool: ToolSpec | None = None,
        max_tokens: int = 4096,
        reasoning_effort: str = "",
        temperature: float | None = None,
    ) -> Completion:
        notes: list[str] = []
        if reasoning_effort:
            notes.append(f"effort {reasoning_effort!r} unsupported by the local provider → default")
        model = _load_model(self.model_path)
        vocab = model.get_vocab()
        prompt = self.render_prompt(messages, tool, max_tokens=max_tokens)
        bos = vocab.token_bos()
        starts_with_bos = bos >= 0 and prompt.startswith(vocab.token_to_piece(bos, special=True))
        tokens = vocab.tokenize(prompt, add_special=not starts_with_bos, parse_special=True)
        n_ctx = min(self.context_tokens, model.n_ctx_train)
        room = n_ctx - len(tokens)
        if room < MIN_OUTPUT_TOKENS:
            raise LLMFatalError(
                f"prompt of {len(tokens)} tokens does not fit the local context of {n_ctx} tokens "
                f"(keep prompts under max_input_tokens={self.max_input_tokens})"
            )
        if max_tokens > room:
            notes.append(f"max_tokens {max_tokens} clamped to {room} by the local context ({n_ctx} tokens)")
            max_tokens = room
        gbnf = grammar.schema_to_gbnf(self._bounded(tool, max_tokens)) if tool is not None else None
        temp = DEFAULT_TEMPERATURE if temperature is None else float(temperature)
        with _DECODE_LOCK:
            text, n_out, hit_limit = self._generate(model, tokens, n_ctx, gbnf, max_tokens, temp)
        cut = loop_start(text) if not hit_limit else None
        if cut is not None:
            notes.append(f"loop detected: answer stopped and trimmed at character {cut} of {len(text)}")
            text = text[:cut]
            if tool is not None:  # a trimmed JSON answer is made whole again, closed leniently
                with suppress(ValueError):
                    text = json.dumps(loads_truncated(text), ensure_ascii=False)
        args = None
        if tool is not None:
            with suppress(ValueError):
                args = loads_lenient(text)
            if isinstance(args, dict) and hit_limit:
                # The grammar closed the object exactly at the limit: the answer is complete.
                hit_limit = False
                notes.append("arguments completed exactly at max_tokens")
        completion = Completion(
            text=text,
            finish_reason="length" if hit_limit else "stop",
            usage=Usage(input_tokens=len(tokens), output_tokens=n_out),
            model=self.model,
            provider=self.provider,
            notes=notes,
        )
        if hit_limit:
            if tool is not None:
                completion.tool_calls = [partial_call(tool.name, text, completion.notes)]
            raise LLMTruncatedError(
                f"local model {self.model} stopped at max_tokens ({completion.usage.output_tokens} output tokens)",
                partial=completion,
            )
        if tool is None:
            return completion
        if not isinstance(args, dict):
            raise output_error(f"local model {self.model} produced unparseable arguments for {tool.name}", completion)
        missing = [k for k in tool.parameters.get("required", ()) if k not in args]
        if missing:
            raise output_error(f"local model {self.model}: {tool.name} arguments lack {', '.join(missing)}", completion)
        completion.tool_calls = [ToolCall(name=tool.name, arguments=args, raw_arguments=text)]
        completion.text = ""
        return completion

    def _generate(self, model, tokens: list[int], n_ctx: int, gbnf: str | None, max_tokens: int, temp: float):
        """Decode the prompt, then sample up to max_tokens. Returns (text, n_generated, hit_limit)."""
        binding = _runtime()
        vocab = model.get_vocab()
        ctx = _context(self.model_path, self.threads, n_ctx)
        ctx.kv_cache_clear()
        sampler = binding.LlamaSampler(binding.LlamaSamplerChainParams())
        if gbnf is not None:
            try:
                sampler.add_grammar(vocab, gbnf, "root")  # first: filters to grammar-legal tokens
            except Exception as exc:
                raise LLMFatalError(f"llama.cpp rejected the grammar for the tool schema: {exc}") from None
        sampler.add_penalties(REPEAT_LAST_N, REPEAT_PENALTY, 0.0, 0.0)
        if temp <= 0:
            sampler.add_greedy()
        else:
            sampler.add_top_k(40)
            sampler.add_top_p(0.95, 1)
            sampler.add_temp(temp)
            sampler.add_dist(SEED)
        started = last_report = time.monotonic()
        batch = ctx.n_batch
        for i in range(0, len(tokens), batch):  # prompt in n_batch chunks
            cancel.check()
            ctx.decode(binding.llama_batch_get_one(tokens[i : i + batch], i))
            last_report = self._report("prompt", min(i + batch, len(tokens)), len(tokens), started, last_report)
        prompt_seconds = time.monotonic() - started
        out: list[int] = []
        pos, hit_limit = len(tokens), True
        for n in range(max_tokens):
            cancel.check()  # Ctrl-C / SIGTERM: stop between tokens
            token = sampler.sample(ctx, -1)
            if vocab.is_eog(token):
                hit_limit = False
                break
            out.append(token)
            if len(out) % LOOP_CHECK_EVERY == 0 and loop_start(vocab.detokenize(out, True, False)) is not None:
                hit_limit = False  # stopped on purpose: complete() trims the repetition
                break
            ctx.decode(binding.llama_batch_get_one([token], pos))
            pos += 1
            last_report = self._report("generate", n + 1, max_tokens, started, last_report)
        n_out = pos - len(tokens)
        elapsed = time.monotonic() - started
        log.info(
            "local %s: %d prompt tokens in %.1f s, %d output tokens in %.1f s (%s)",
            self.model,
            len(tokens),
            prompt_seconds,
            n_out,
            elapsed - prompt_seconds,
            "max_tokens reached" if hit_limit else "stop",
        )
        # Detokenize the whole answer at once: a multi-byte character may span two tokens.
        text = vocab.detokenize(out, remove_special=True, unparse_special=False) if out else ""
        return text, n_out, hit_limit

    def _report(self, stage: str, done: int, total: int, started: float, last: float) -> float:
        if self.progress is not None:
            self.progress(stage, done, total)
        now = time.monotonic()
        if now - last >= PROGRESS_EVERY_SECONDS:
            log.info("local %s: %s %d/%d tokens after %.0f s", self.model, stage, done, total, now - started)
            return now
        return last
