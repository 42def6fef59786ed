"""OpenAICompatLLM against the fake OpenAI-compatible server, over real loopback HTTP."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from pydantic import SecretStr

from dsh_memory.errors import (
    LLMFatalError,
    LLMOutputError,
    LLMTransientError,
    LLMTruncatedError,
    NoModelRouteError,
)
from dsh_memory.llm.base import LLM, ToolSpec
from dsh_memory.llm.factory import make_llm, phase_options
from dsh_memory.llm.openai_compat import OpenAICompatLLM
from dsh_memory.settings import ModelRoute
from dsh_memory.testing.fake_openai import FakeOpenAIServer, Reply

KEY = "sk-test-SECRET-0123456789abcdef"
MSGS = [{"role": "system", "content": "extract"}, {"role": "user", "content": "transcript"}]
SAVE = ToolSpec(
    name="memory_save",
    description="Save one rollout's memory",
    parameters={
        "type": "object",
        "properties": {"raw_memory": {"type": "string"}, "rollout_slug": {"type": "string"}},
        "required": ["raw_memory", "rollout_slug"],
    },
)
ARGS = {"raw_memory": "- user prefers uv\n- tests: pytest -q", "rollout_slug": "uv-setup"}


@pytest.fixture
def srv():
    with FakeOpenAIServer() as s:
        yield s


@pytest.fixture
def llm(srv):
    with OpenAICompatLLM(srv.base_url, "fake-model", KEY, timeout_seconds=5) as client:
        yield client


def test_is_an_llm(llm):
    assert isinstance(llm, LLM)
    assert KEY not in repr(llm)


def test_forced_tool_call_round_trip(srv, llm):
    srv.script(Reply.tool(ARGS, prompt_tokens=120, completion_tokens=33))
    c = llm.complete(MSGS, tool=SAVE, max_tokens=777)
    assert c.tool_calls[0].name == "memory_save"
    assert c.tool_calls[0].arguments == ARGS
    assert c.finish_reason == "tool_calls"
    assert (c.usage.input_tokens, c.usage.output_tokens) == (120, 33)
    assert c.model == "fake-model" and c.provider == "openai" and c.reasoning_effort == ""
    [req] = srv.requests
    assert req["messages"] == MSGS and req["max_tokens"] == 777
    assert req["tools"] == [{"type": "function", "function": SAVE.model_dump()}]
    assert req["tool_choice"] == {"type": "function", "function": {"name": "memory_save"}}
    assert "reasoning_effort" not in req and "thinking" not in req and "temperature" not in req
    assert srv.paths == ["/v1/chat/completions"]
    assert srv.request_headers[0]["authorization"] == f"Bearer {KEY}"
    assert KEY not in json.dumps(srv.requests)  # the key travels only in the header


def test_plain_completion_without_tool(srv, llm):
    srv.script(Reply.text("hello", model="served-model"))
    c = llm.complete(MSGS, temperature=0.2)
    assert c.text == "hello" and c.tool_calls == [] and c.model == "served-model"
    assert srv.requests[0]["temperature"] == 0.2 and "tools" not in srv.requests[0]


def test_base_url_without_v1(srv):
    srv.script(Reply.tool(ARGS))
    with OpenAICompatLLM(srv.root_url + "/", "fake-model") as client:  # DeepSeek-style, trailing slash
        assert client.complete(MSGS, tool=SAVE).tool_calls[0].arguments == ARGS
    assert srv.paths == ["/chat/completions"]
    assert "authorization" not in srv.request_headers[0]  # no key configured → no header


def test_text_fallback_fenced_json(srv, llm):
    srv.script(Reply.text('I will not use tools.\n```json\n{"raw_memory": "a\nb", "rollout_slug": "s",}\n```'))
    c = llm.complete(MSGS, tool=SAVE)
    assert c.tool_calls[0].arguments == {"raw_memory": "a\nb", "rollout_slug": "s"}
    assert any("recovered from text" in n for n in c.notes)


def test_text_fallback_prose_json_and_wrapper(srv, llm):
    srv.script(
        Reply.text('Note {this}. Result: {"raw_memory": "x {y}", "rollout_slug": "z"} hope it helps'),
        Reply.text('{"name": "memory_save", "arguments": {"raw_memory": "w", "rollout_slug": "v"}}'),
    )
    assert llm.complete(MSGS, tool=SAVE).tool_calls[0].arguments == {"raw_memory": "x {y}", "rollout_slug": "z"}
    assert llm.complete(MSGS, tool=SAVE).tool_calls[0].arguments == {"raw_memory": "w", "rollout_slug": "v"}


def test_lenient_tool_arguments(srv, llm):
    srv.script(Reply.raw_tool('{"raw_memory": "line1\nline2", "rollout_slug": "s",}'))
    c = llm.complete(MSGS, tool=SAVE)
    assert c.tool_calls[0].arguments == {"raw_memory": "line1\nline2", "rollout_slug": "s"}


def test_malformed_arguments_without_fallback_is_output_error(srv, llm):
    srv.script(Reply.raw_tool('{"raw_memory": "x", "rollout_slug": '), Reply.text("I cannot comply."))
    with pytest.raises(LLMOutputError) as ei:
        llm.complete(MSGS, tool=SAVE)
    assert "unparseable" in str(ei.value) and ei.value.completion.finish_reason == "tool_calls"
    with pytest.raises(LLMOutputError, match="no tool call"):
        llm.complete(MSGS, tool=SAVE)


def test_deeply_nested_answers_are_llm_errors_not_recursion_errors(srv, llm):
    """JSON nested past Python's recursion limit (tool arguments, a cut-off answer, the body
    itself) is bad output like any other: the LLM error classes, never a RecursionError."""
    deep = '{"raw_memory": ' + "[" * 100_000 + "]" * 100_000 + ', "rollout_slug": "s"}'
    srv.script(
        Reply.raw_tool(deep), Reply.truncated(deep[:150_000]), Reply(kind="error", status=200, body="[" * 100_000)
    )
    with pytest.raises(LLMOutputError, match="unparseable"):
        llm.complete(MSGS, tool=SAVE)
    with pytest.raises(LLMTruncatedError) as ei:
        llm.complete(MSGS, tool=SAVE)
    assert ei.value.partial.tool_calls[0].raw_arguments == deep[:150_000]
    with pytest.raises(LLMTransientError, match="malformed response"):
        llm.complete(MSGS, tool=SAVE)


SECRET = "sk-" + "Q1w2E3r4T5y6U7i8O9p0A1s2D3f4G5h6J7k8L9z0"
CALL = {"name": "memory_save", "arguments": json.dumps(ARGS)}


@pytest.mark.parametrize(
    "body",
    [
        {"choices": [{"message": {"content": [{"type": "text", "text": f"the key {SECRET}"}]}}]},
        {"model": 5, "choices": [{"message": {"content": "x"}, "finish_reason": "stop"}]},
        {"choices": [{"message": {"content": "x"}, "finish_reason": 3}]},
        {"usage": {"prompt_tokens": "lots"}, "choices": [{"message": {"content": "x"}}]},
        {"usage": [1], "choices": [{"message": {"content": "x"}}]},
        {"choices": [{"message": f"the key {SECRET}"}]},
        {"choices": [{"message": {"tool_calls": {"0": CALL}}, "finish_reason": "tool_calls"}]},
        {"choices": [{"message": {"tool_calls": [{"function": "memory_save"}]}, "finish_reason": "tool_calls"}]},
        {"choices": [{"message": {"tool_calls": [{"function": {**CALL, "name": 7}}]}, "finish_reason": "tool_calls"}]},
        {"choices": [{"message": {"tool_calls": [{"function": {**CALL, "name": 7}}]}, "finish_reason": "length"}]},
    ],
)
def test_a_completion_with_a_field_of_the_wrong_type_is_malformed_and_quotes_nothing(srv, llm, body):
    """Not a chat completion, like a body that is not JSON: never a pydantic, attribute or key
    error, whose message would quote the answer (a secret's tail, past the redactor's reach)."""
    srv.script(Reply(kind="error", status=200, body=body))
    with pytest.raises(LLMTransientError, match="malformed response") as ei:
        llm.complete(MSGS, tool=SAVE)
    assert SECRET[-12:] not in str(ei.value)


def test_the_call_of_the_tool_asked_for_is_taken_among_several(srv, llm):
    """A model that calls another tool first and then the one asked for (`memory_save` second):
    only the first call was read, the run failed on it and the good answer was thrown away."""
    calls = [
        {"id": "a", "type": "function", "function": {"name": "web_search", "arguments": '{"q": "uv"}'}},
        {"id": "b", "type": "function", "function": {"name": "memory_save", "arguments": json.dumps(ARGS)}},
    ]
    body = {"choices": [{"message": {"content": "", "tool_calls": calls}, "finish_reason": "tool_calls"}]}
    srv.script(Reply(kind="error", status=200, body=body))
    c = llm.complete(MSGS, tool=SAVE)
    assert [(t.name, t.arguments) for t in c.tool_calls] == [("memory_save", ARGS)]


def test_malformed_arguments_rescued_by_text(srv, llm):
    srv.script(Reply.raw_tool("{broken", content='{"raw_memory": "r", "rollout_slug": "s"}'))
    assert llm.complete(MSGS, tool=SAVE).tool_calls[0].arguments == {"raw_memory": "r", "rollout_slug": "s"}


def test_429_with_retry_after_seconds_and_date(srv, llm):
    srv.script(Reply.error(429, retry_after=7), Reply.error(429, retry_after="Wed, 21 Oct 2015 07:28:00 GMT"))
    with pytest.raises(LLMTransientError) as ei:
        llm.complete(MSGS, tool=SAVE)
    assert ei.value.retry_after == 7.0 and "429" in str(ei.value)
    with pytest.raises(LLMTransientError) as ei:
        llm.complete(MSGS, tool=SAVE)
    assert ei.value.retry_after == 0.0  # a date in the past → retry now


@pytest.mark.parametrize("status", [500, 502, 503])
def test_server_errors_are_transient(srv, llm, status):
    srv.script(Reply.error(status, body="upstream exploded"))
    with pytest.raises(LLMTransientError) as ei:
        llm.complete(MSGS)
    assert ei.value.retry_after is None and "upstream exploded" in str(ei.value)


def test_timeout_is_transient(srv):
    srv.script(Reply.tool(ARGS, delay_seconds=2.0))
    with OpenAICompatLLM(srv.base_url, "fake-model", KEY, timeout_seconds=0.3) as client:
        with pytest.raises(LLMTransientError, match="timeout"):  # not the answer, 2 s later
            client.complete(MSGS, tool=SAVE)


def test_connection_drop_is_transient(srv, llm):
    srv.script(Reply.drop())
    with pytest.raises(LLMTransientError, match="connection error"):
        llm.complete(MSGS, tool=SAVE)
    srv.script(Reply.tool(ARGS))  # the pool recovers
    assert llm.complete(MSGS, tool=SAVE).tool_calls[0].arguments == ARGS


def test_connection_refused_is_transient(srv):
    url = srv.base_url
    srv.stop()
    with OpenAICompatLLM(url, "fake-model", KEY, timeout_seconds=2) as client:
        with pytest.raises(LLMTransientError) as ei:
            client.complete(MSGS)
    assert KEY not in str(ei.value)


@pytest.mark.parametrize(
    "status, message",
    [
        (401, f"Incorrect API key provided: {KEY}"),  # providers sometimes echo the key
        (403, "forbidden"),
        (400, "This model's maximum context length is 65536 tokens"),
        (404, "Model Not Exist"),
        (422, "unprocessable"),
    ],
)
def test_client_errors_are_fatal_and_never_show_the_key(srv, llm, status, message):
    srv.script(Reply.error(status, {"error": {"message": message, "type": "invalid_request_error"}}))
    with pytest.raises(LLMFatalError) as ei:
        llm.complete(MSGS, tool=SAVE)
    text = str(ei.value) + repr(ei.value)
    assert str(status) in text and KEY not in text
    assert message.replace(KEY, "***")[:20] in text


@pytest.mark.parametrize("status, error", [(400, LLMFatalError), (500, LLMTransientError)])
def test_a_secret_in_the_providers_message_is_redacted_before_the_cut(srv, llm, status, error):
    """The message is raised as it is: Prefect logs the failed task with it, unredacted. A proxy
    that quotes an upstream key (not ours: `_scrub` knows ours only), at the cut or before it."""
    for message in (f"upstream rejected key {SECRET}", "x " * 240 + SECRET):
        srv.script(Reply.error(status, {"error": {"message": message}}))
        with pytest.raises(error) as ei:
            llm.complete(MSGS, tool=SAVE)
        assert "sk-Q1w2E3r4T5y6" not in str(ei.value) and str(status) in str(ei.value)


def test_truncation_keeps_partial(srv, llm):
    srv.script(Reply.truncated('{"raw_memory": "- a\\n- b', completion_tokens=4096))
    with pytest.raises(LLMTruncatedError) as ei:
        llm.complete(MSGS, tool=SAVE)
    partial = ei.value.partial
    assert partial.finish_reason == "length" and partial.usage.output_tokens == 4096
    assert partial.tool_calls[0].arguments == {"raw_memory": "- a\n- b"}
    assert partial.tool_calls[0].raw_arguments.startswith('{"raw_memory"')


def test_truncated_text_answer(srv, llm):
    srv.script(Reply.truncated(content="Once upon a"))
    with pytest.raises(LLMTruncatedError) as ei:
        llm.complete(MSGS)
    assert ei.value.partial.text == "Once upon a" and ei.value.partial.tool_calls == []


def test_rejected_forced_tool_choice_is_retried_once_with_auto(srv, llm):
    srv.script(
        Reply.error(400, {"error": {"message": "Thinking mode does not support this tool_choice"}}),
        Reply.tool(ARGS),
        Reply.tool(ARGS),
    )
    c = llm.complete(MSGS, tool=SAVE)
    assert c.tool_calls[0].arguments == ARGS and any("tool_choice" in n for n in c.notes)
    llm.complete(MSGS, tool=SAVE)
    reqs = srv.requests
    assert "tool_choice" in reqs[0] and "tool_choice" not in reqs[1] and "tool_choice" not in reqs[2]


# -- reasoning effort ---------------------------------------------------------------------------


def test_effort_from_metadata_is_applied_and_resolved_once(srv):
    srv.models = [{"id": "fake-model", "reasoning": {"efforts": [{"id": "low"}, {"id": "high"}]}}]
    with OpenAICompatLLM(srv.base_url, "fake-model") as client:
        c = client.complete(MSGS, reasoning_effort="high")
        client.complete(MSGS, reasoning_effort="low")
    assert c.reasoning_effort == "high" and c.notes == []
    assert [r["reasoning_effort"] for r in srv.requests] == ["high", "low"]
    assert srv.models_calls == 1


def test_unsupported_effort_degrades_with_note(srv):
    srv.models = ["fake-model"]  # no effort metadata
    with OpenAICompatLLM(srv.base_url, "fake-model") as client:
        c = client.complete(MSGS, tool=SAVE, reasoning_effort="max")
    assert c.reasoning_effort == "" and "reasoning_effort" not in srv.requests[0]
    assert any("unsupported" in n and "'max'" in n for n in c.notes)


@pytest.mark.parametrize("failure", [Reply.error(500), Reply.drop(), Reply.error(404)])
def test_metadata_failure_never_fails_the_call(srv, failure):
    srv.models_reply = failure
    with OpenAICompatLLM(srv.base_url, "fake-model") as client:
        c = client.complete(MSGS, tool=SAVE, reasoning_effort="high")
    assert c.tool_calls and c.reasoning_effort == ""
    assert any("metadata unavailable" in n for n in c.notes)


def test_no_effort_means_no_metadata_lookup(srv, llm):
    llm.complete(MSGS)
    assert srv.models_calls == 0


def test_deepseek_wire_format(srv):
    with OpenAICompatLLM(srv.root_url, "deepseek-v4-flash", KEY, flavor="deepseek") as client:
        hi = client.complete(MSGS, tool=SAVE, reasoning_effort="max")
        off = client.complete(MSGS, tool=SAVE, reasoning_effort="off")
        dflt = client.complete(MSGS, tool=SAVE)
        mapped = client.complete(MSGS, reasoning_effort="medium")
        bogus = client.complete(MSGS, reasoning_effort="turbo")
    r = srv.requests
    assert r[0]["thinking"] == {"type": "enabled"} and r[0]["reasoning_effort"] == "max"
    assert "tool_choice" not in r[0] and r[0]["tools"]  # thinking mode rejects a forced choice
    assert hi.reasoning_effort == "max" and any("not forced" in n for n in hi.notes)
    assert r[1]["thinking"] == {"type": "disabled"} and "reasoning_effort" not in r[1]
    assert r[1]["tool_choice"]["function"]["name"] == "memory_save" and off.reasoning_effort == "off"
    assert "thinking" not in r[2] and "tool_choice" not in r[2] and dflt.reasoning_effort == ""
    assert r[3]["reasoning_effort"] == "high" and mapped.reasoning_effort == "high"
    assert "thinking" not in r[4] and bogus.reasoning_effort == "" and any("unsupported" in n for n in bogus.notes)
    assert srv.models_calls == 0  # DeepSeek efforts come from the table


def test_deepseek_detected_by_host_and_legacy_chat_alias():
    client = OpenAICompatLLM("https://api.deepseek.com", "deepseek-chat", "k")
    assert client.flavor == "deepseek"
    assert client.resolve_effort("off") == ("off", [])
    effort, notes = client.resolve_effort("high")
    assert effort == "" and "unsupported" in notes[0]
    client.close()


def test_openai_flavor_table():
    with OpenAICompatLLM("https://api.openai.com/v1", "o4-mini", "k") as client:
        assert client.flavor == "openai"
        assert client.resolve_effort("high") == ("high", [])
        assert client.resolve_effort("max")[0] == "high"
        assert client.resolve_effort("") == ("", [])
    with OpenAICompatLLM("https://api.openai.com/v1", "gpt-4o", "k") as client:
        assert client.resolve_effort("low")[0] == ""


# -- concurrency -------------------------------------------------------------------------------


def test_concurrent_slow_requests_share_one_client(srv):
    srv.latency_seconds = 0.5
    with OpenAICompatLLM(srv.base_url, "fake-model", timeout_seconds=10) as client:
        with ThreadPoolExecutor(8) as pool:
            results = list(pool.map(lambda _: client.complete(MSGS, tool=SAVE), range(16)))
    assert len(results) == 16 and all(r.tool_calls for r in results)
    assert srv.max_in_flight == 8  # 8 pooled connections in flight at once: calls are not serialized


# -- factory -----------------------------------------------------------------------------------


def test_make_llm_without_key_names_the_env_vars():
    route = ModelRoute.from_env({"DSH_MEMORY_PROVIDER": "openai"})
    with pytest.raises(NoModelRouteError) as ei:
        make_llm(route, "phase1")
    msg = str(ei.value)
    for var in ("DSH_MEMORY_API_KEY", "DEEPSEEK_API_KEY", "DSH_MEMORY_BASE_URL", "DSH_MEMORY_MODEL"):
        assert var in msg


def test_auto_provider_falls_back_to_local_and_explains_both_options(tmp_path, srv):
    # No endpoint configured: 'auto' means the local model; when it is unavailable the error
    # names both ways out (an endpoint, or the local model).
    route = ModelRoute.from_env({"DSH_MEMORY_MODEL_PATH": str(tmp_path / "missing.gguf")})
    assert route.provider == "auto" and route.effective_provider == "local"
    with pytest.raises(NoModelRouteError) as ei:
        make_llm(route, "phase1")
    msg = str(ei.value)
    assert "missing.gguf" in msg and "DSH_MEMORY_API_KEY" in msg
    # An endpoint configured: 'auto' means that endpoint.
    configured = ModelRoute.from_env({"DSH_MEMORY_BASE_URL": srv.base_url})
    assert configured.effective_provider == "openai"
    assert isinstance(make_llm(configured, "phase1"), OpenAICompatLLM)


def test_make_llm_routes_per_phase(srv):
    env = {"DSH_MEMORY_BASE_URL": srv.base_url, "DEEPSEEK_API_KEY": KEY}
    route = ModelRoute.from_env(env, phase2_model="big-model", phase2_reasoning_effort="high")
    llm1, llm2 = make_llm(route, "phase1"), make_llm(route, "phase2")
    assert isinstance(llm1, OpenAICompatLLM) and llm1.model == "deepseek-chat" and llm2.model == "big-model"
    assert phase_options(route, "phase2") == {"max_tokens": 32768, "reasoning_effort": "high"}
    srv.script(Reply.tool(ARGS))
    assert llm2.complete(MSGS, tool=SAVE, **phase_options(route, "phase2")).tool_calls[0].arguments == ARGS
    assert srv.requests[0]["model"] == "big-model"
    with pytest.raises(ValueError):
        make_llm(route, "phase3")


def test_make_llm_local_provider_reports_reason():
    route = ModelRoute(provider="local", api_key=SecretStr(KEY))
    try:
        llm = make_llm(route, "phase1")
    except NoModelRouteError as exc:
        assert "local" in str(exc) and KEY not in str(exc)
    else:  # the local module exists in this tree: it produced an LLM
        assert isinstance(llm, LLM)


def test_make_llm_local_missing_model_file_is_no_route(tmp_path):
    route = ModelRoute(provider="local", model_path=tmp_path / "absent.gguf")
    with pytest.raises(NoModelRouteError, match="absent.gguf"):
        make_llm(route, "phase2")


def test_openai_reasoning_model_drops_temperature(srv):
    with OpenAICompatLLM(srv.base_url, "o4-mini", flavor="openai") as client:
        c = client.complete(MSGS, temperature=0.3, reasoning_effort="low")
    assert "temperature" not in srv.requests[0] and srv.requests[0]["reasoning_effort"] == "low"
    assert any("temperature dropped" in n for n in c.notes)


def test_a_call_kept_alive_past_its_deadline_is_given_up_and_one_within_it_is_answered(srv):
    """An endpoint that keeps a non-streaming answer alive with blank lines (DeepSeek, while it
    thinks) never trips the per-read timeout: a call could hang for ever. `deadline_seconds`
    bounds the whole call (a transient error, retried like a timeout); an answer that comes
    after keep-alive lines within it is read as usual."""
    srv.script(Reply.keepalive(1.0, then=Reply.tool(ARGS)))
    with OpenAICompatLLM(srv.base_url, "fake-model", KEY, timeout_seconds=0.5, deadline_seconds=30) as client:
        assert client.complete(MSGS, tool=SAVE).tool_calls[0].arguments == ARGS  # 20 blank lines, then JSON
    srv.script(Reply.keepalive(60.0, then=Reply.tool(ARGS)))
    with OpenAICompatLLM(srv.base_url, "fake-model", KEY, timeout_seconds=0.5, deadline_seconds=1.0) as client:
        with pytest.raises(LLMTransientError, match="deadline"):
            client.complete(MSGS, tool=SAVE)
    # The client hung up while the endpoint was still keeping the answer alive (not after its 60 s).
    deadline = time.monotonic() + 60
    while srv.walked_away == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert srv.walked_away == 1


def test_a_call_whose_headers_trickle_in_is_given_up_at_its_deadline(srv):
    """An endpoint (or a proxy) stuck before its answer's headers end, a byte now and then: no
    read waits long enough for the read timeout, and the deadline was checked only between body
    reads, so the call (and Phase 2's lock) was held until the headers ended, if ever. The
    deadline bounds the whole call, headers included."""
    srv.script(Reply.slow_headers(1.0, then=Reply.tool(ARGS)))
    with OpenAICompatLLM(srv.base_url, "fake-model", KEY, timeout_seconds=0.5, deadline_seconds=30) as client:
        assert client.complete(MSGS, tool=SAVE).tool_calls[0].arguments == ARGS  # slow headers, within it
    srv.script(Reply.slow_headers(180.0, then=Reply.tool(ARGS)))
    with OpenAICompatLLM(srv.base_url, "fake-model", KEY, timeout_seconds=0.5, deadline_seconds=1.0) as client:
        started = time.monotonic()
        with pytest.raises(LLMTransientError, match="call_deadline_seconds"):
            client.complete(MSGS, tool=SAVE)
    assert time.monotonic() - started < 90  # the deadline (1 s), not the trickle's 180 s


def test_an_answer_past_the_size_bound_is_refused_not_read_into_memory(srv, llm):
    """A broken endpoint or proxy that streams without end (or a hostile one) filled memory until
    the call's deadline, an hour by default; the client stops reading at 16 MiB (the longest
    answer max_tokens allows is a few MiB)."""
    srv.script(Reply.text("x" * (17 << 20)), Reply.tool(ARGS))
    with pytest.raises(LLMFatalError, match="MiB"):
        llm.complete(MSGS, tool=SAVE)
    assert llm.complete(MSGS, tool=SAVE).tool_calls[0].arguments == ARGS  # the next call is read as usual
