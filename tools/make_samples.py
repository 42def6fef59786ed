"""Regenerate the bundled demo sessions in dsh_memory/samples/ (written for this project).

Three DSH v4 sessions (two projects, one with a user preference and a failure shield, one
chit-chat that must yield a no-op), one Codex rollout and one Claude Code transcript.
Run: python tools/make_samples.py
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "dsh_memory" / "samples"
T0 = 1793000000000  # 2026-10-26T...Z (epoch ms)


class Dsh:
    def __init__(self, sid: str, cwd: str, t0: int, out: Path = OUT):
        self.sid, self.cwd, self.t, self.seq, self.lines, self.turn = sid, cwd, t0, 0, [], 0
        self.out = out
        self.lines.append(
            {
                "type": "session",
                "version": 4,
                "id": sid,
                "createdAt": t0,
                "cwd": cwd,
                "isSeeded": False,
                "delegationDepth": 0,
            }
        )

    def ev(self, typ: str, data: dict, **extra) -> None:
        self.t += 1500
        rec = {"type": typ, "seq": self.seq, "time": self.t, "data": data}
        rec.update(extra)
        self.lines.append(rec)
        self.seq += 1

    def user(self, text: str) -> None:
        self.turn += 1
        self.ev("turn/start", {"turn": self.turn})
        self.ev(
            "user/message",
            {
                "id": str(uuid.uuid4()),
                "role": "user",
                "content": [{"type": "text", "text": text}],
                "source": {"kind": "user"},
            },
            surfaceOp="append",
        )

    def say(self, text: str) -> None:
        self.ev(
            "assistant/message",
            {
                "turn": self.turn,
                "step": 1,
                "message": {
                    "id": str(uuid.uuid4()),
                    "role": "assistant",
                    "content": [{"type": "text", "text": text}],
                    "source": {"kind": "model", "provider": "deepseek-official", "model": "deepseek-v4-flash"},
                },
            },
            surfaceOp="append",
        )

    def tool(self, name: str, args: dict, output: str, error: bool = False) -> None:
        cid = "call_" + uuid.uuid4().hex[:12]
        arg_text = json.dumps(args)
        self.ev(
            "assistant/message",
            {
                "turn": self.turn,
                "step": 1,
                "message": {
                    "id": str(uuid.uuid4()),
                    "role": "assistant",
                    "content": [{"type": "tool-call", "id": cid, "name": name, "arguments": arg_text}],
                    "source": {"kind": "model", "provider": "deepseek-official", "model": "deepseek-v4-flash"},
                },
            },
            surfaceOp="append",
        )
        self.ev("tool/call", {"turn": self.turn, "step": 1, "callId": cid, "name": name, "arguments": arg_text})
        self.ev(
            "tool/result",
            {
                "turn": self.turn,
                "step": 1,
                "message": {
                    "id": str(uuid.uuid4()),
                    "role": "tool",
                    "source": {"kind": "tool", "callId": cid},
                    "toolCallId": cid,
                    "isError": error,
                    "content": [{"type": "text", "text": output}],
                },
            },
            sourceEventSeqs=[self.seq - 1],
            surfaceOp="append",
        )

    def end(self) -> None:
        self.ev("turn/end", {"turn": self.turn, "reason": {"kind": "completed"}})

    def write(self) -> None:
        proj = "--" + self.cwd.strip("/").replace("/", "-") + "--"
        d = self.out / "dsh" / "sessions" / proj / self.sid
        d.mkdir(parents=True, exist_ok=True)
        (d / "session.v4.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in self.lines))


class Codex:
    """A Codex CLI rollout: response_item messages, shell function calls with exit codes."""

    def __init__(self, sid: str, cwd: str, day: str, out: Path = OUT):
        self.sid, self.cwd, self.day, self.out, self.n = sid, cwd, day, out, 0
        self.ts = f"{day}T10:00:00.000Z"
        meta = {"id": sid, "timestamp": self.ts, "cwd": cwd, "originator": "codex_cli_rs", "cli_version": "0.60.0"}
        self.recs: list[dict] = [{"timestamp": self.ts, "type": "session_meta", "payload": {**meta, "source": "cli"}}]

    def _item(self, payload: dict) -> None:
        self.recs.append({"timestamp": self.ts, "type": "response_item", "payload": payload})

    def user(self, text: str) -> None:
        self._item({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]})

    def say(self, text: str) -> None:
        self._item({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]})

    def shell(self, command: list[str], output: str, exit_code: int = 0) -> None:
        self.n += 1
        cid = f"call_{self.n}"
        self._item(
            {"type": "function_call", "name": "shell", "call_id": cid, "arguments": json.dumps({"command": command})}
        )
        result = json.dumps({"output": output, "metadata": {"exit_code": exit_code}})
        self._item({"type": "function_call_output", "call_id": cid, "output": result})

    def write(self) -> None:
        y, m, d = self.day.split("-")
        folder = self.out / "codex" / "sessions" / y / m / d
        folder.mkdir(parents=True, exist_ok=True)
        name = f"rollout-{self.day}T10-00-00-{self.sid}.jsonl"
        (folder / name).write_text("".join(json.dumps(r) + "\n" for r in self.recs))


class Claude:
    """A Claude Code transcript: one parentUuid chain of user / assistant records."""

    def __init__(self, sid: str, cwd: str, day: str, out: Path = OUT):
        self.sid, self.cwd, self.day, self.out, self.n, self.parent = sid, cwd, day, out, 0, None
        self.base = {"sessionId": sid, "cwd": cwd, "version": "2.0.14", "isSidechain": False, "userType": "external"}
        self.recs: list[dict] = []

    def _rec(self, typ: str, message: dict) -> None:
        self.n += 1
        uid = f"{typ[0]}{self.n}"
        stamp = f"{self.day}T09:{self.n // 60:02d}:{self.n % 60:02d}.000Z"
        self.recs.append(dict(self.base, type=typ, uuid=uid, parentUuid=self.parent, timestamp=stamp, message=message))
        self.parent = uid

    def user(self, text: str) -> None:
        self._rec("user", {"role": "user", "content": text})

    def say(self, text: str) -> None:
        content = [{"type": "text", "text": text}]
        self._rec(
            "assistant", {"id": f"msg_{self.n}", "role": "assistant", "model": "claude-sonnet-4-5", "content": content}
        )

    def tool(self, name: str, args: dict, output: str, error: bool = False) -> None:
        tid = f"toolu_{self.n + 1}"
        use = [{"type": "tool_use", "id": tid, "name": name, "input": args}]
        self._rec(
            "assistant", {"id": f"msg_{self.n}", "role": "assistant", "model": "claude-sonnet-4-5", "content": use}
        )
        result = {"type": "tool_result", "tool_use_id": tid, "is_error": error, "content": output}
        self._rec("user", {"role": "user", "content": [result]})

    def write(self) -> None:
        folder = self.out / "claude" / "projects" / self.cwd.replace("/", "-")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{self.sid}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in self.recs))


def dsh_samples() -> None:
    s = Dsh("5a1d3c7e-0b2f-4e6a-9c8d-1f2e3a4b5c6d", "/home/demo/src/weather-cli", T0)
    s.user(
        "The `weather-cli forecast` command crashes with `KeyError: 'hourly'` for Oslo. Please fix it. "
        "Use `make test`, not pytest directly: the Makefile sets up the fixtures."
    )
    s.tool(
        "bash",
        {"command": "make test"},
        "tests/test_forecast.py F\nE   KeyError: 'hourly'\n1 failed, 14 passed\n[exit code: 2]",
        error=True,
    )
    s.tool("read", {"file_path": "src/weather_cli/forecast.py"}, "12: data = resp.json()\n13: hours = data['hourly']\n")
    s.say(
        "The API omits `hourly` when the location has no hourly model (Oslo uses `hourly_1h`). "
        "I'll fall back to `hourly_1h` and raise a clear error if neither exists."
    )
    s.tool(
        "edit",
        {
            "file_path": "src/weather_cli/forecast.py",
            "old_string": "hours = data['hourly']",
            "new_string": "hours = data.get('hourly') or data.get('hourly_1h')",
        },
        "ok",
    )
    s.tool("bash", {"command": "make test"}, "15 passed in 0.8s")
    s.say("Fixed: `forecast.py` falls back to `hourly_1h`; `make test` passes (15 passed).")
    s.end()
    s.user("Thanks. Please always run `make lint` before telling me something is done in this repo.")
    s.tool("bash", {"command": "make lint"}, "ruff check src tests\nAll checks passed!")
    s.say("Noted: I'll run `make lint` before reporting work as done. Lint is clean.")
    s.end()
    s.write()

    s = Dsh("7c2e4a6b-8d0f-4b1c-a3e5-9f7d1b3c5e7a", "/home/demo/src/ledger", T0 + 86_400_000)
    s.user("Deploy to staging fails with `permission denied (publickey)`. The deploy script is scripts/deploy.sh.")
    s.tool("bash", {"command": "ssh-add -l"}, "The agent has no identities.", error=True)
    s.say("Your ssh-agent has no keys loaded, so the deploy's `git pull` on staging cannot authenticate.")
    s.tool(
        "bash",
        {"command": "ssh-add ~/.ssh/deploy_ed25519 && scripts/deploy.sh staging"},
        "Identity added\nDeploying ledger@a1b2c3 to staging... done (42s)",
    )
    s.say("Staging deploy succeeded after loading the deploy key with `ssh-add ~/.ssh/deploy_ed25519`.")
    s.end()
    s.user("Good. Remember: staging deploys need the deploy key loaded first; production deploys are only done by me.")
    s.say("Understood: load `~/.ssh/deploy_ed25519` before staging deploys, and never deploy to production myself.")
    s.end()
    s.write()

    s = Dsh("9e4f6a8c-1b3d-4f5a-8c7e-2d4f6a8b0c1e", "/home/demo", T0 + 2 * 86_400_000)
    s.user("hi! quick test, are you there?")
    s.say("Yes, I'm here. What can I do for you?")
    s.end()
    s.write()


def codex_sample() -> None:
    sid = "019a1b2c-3d4e-7f60-8a9b-0c1d2e3f4a5b"
    d = OUT / "codex" / "sessions" / "2026" / "10" / "29"
    d.mkdir(parents=True, exist_ok=True)
    ts = "2026-10-29T10:00:00.000Z"
    recs = [
        {
            "timestamp": ts,
            "type": "session_meta",
            "payload": {
                "id": sid,
                "timestamp": ts,
                "cwd": "/home/demo/src/weather-cli",
                "originator": "codex_cli_rs",
                "cli_version": "0.60.0",
                "source": "cli",
            },
        },
        {
            "timestamp": ts,
            "type": "response_item",
            "payload": {
                "type": "message",
                "role": "user",
                "content": [
                    {
                        "type": "input_text",
                        "text": "Add a `--units imperial` flag to `weather-cli forecast`. Metric stays the default.",
                    }
                ],
            },
        },
        {
            "timestamp": ts,
            "type": "response_item",
            "payload": {
                "type": "function_call",
                "name": "shell",
                "call_id": "call_1",
                "arguments": json.dumps({"command": ["make", "test"]}),
            },
        },
        {
            "timestamp": ts,
            "type": "response_item",
            "payload": {
                "type": "function_call_output",
                "call_id": "call_1",
                "output": json.dumps({"output": "16 passed", "metadata": {"exit_code": 0}}),
            },
        },
        {
            "timestamp": ts,
            "type": "response_item",
            "payload": {
                "type": "message",
                "role": "assistant",
                "content": [
                    {
                        "type": "output_text",
                        "text": "Added `--units` (metric|imperial, default metric) with a test; `make test` passes.",
                    }
                ],
            },
        },
    ]
    (d / f"rollout-2026-10-29T10-00-00-{sid}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))


def claude_sample() -> None:
    sid = "3c5e7a9b-1d2f-4a6c-8e0b-2d4f6a8c0e1b"
    d = OUT / "claude" / "projects" / "-home-demo-src-ledger"
    d.mkdir(parents=True, exist_ok=True)
    base = {
        "sessionId": sid,
        "cwd": "/home/demo/src/ledger",
        "version": "2.0.14",
        "isSidechain": False,
        "userType": "external",
    }
    recs = [
        dict(
            base,
            type="user",
            uuid="u1",
            parentUuid=None,
            timestamp="2026-10-30T09:00:00.000Z",
            message={
                "role": "user",
                "content": 'Why does `make migrate` fail with `relation "accounts" already exists`?',
            },
        ),
        dict(
            base,
            type="assistant",
            uuid="a1",
            parentUuid="u1",
            timestamp="2026-10-30T09:00:05.000Z",
            message={
                "id": "msg_1",
                "role": "assistant",
                "model": "claude-sonnet-4-5",
                "content": [
                    {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "make migrate"}}
                ],
            },
        ),
        dict(
            base,
            type="user",
            uuid="u2",
            parentUuid="a1",
            timestamp="2026-10-30T09:00:09.000Z",
            message={
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_1",
                        "is_error": True,
                        "content": 'alembic: relation "accounts" already exists',
                    }
                ],
            },
        ),
        dict(
            base,
            type="assistant",
            uuid="a2",
            parentUuid="u2",
            timestamp="2026-10-30T09:00:20.000Z",
            message={
                "id": "msg_2",
                "role": "assistant",
                "model": "claude-sonnet-4-5",
                "content": [
                    {
                        "type": "text",
                        "text": "The local DB was created by `make seed` without alembic stamps. Run `alembic stamp head` once, then `make migrate` works.",
                    }
                ],
            },
        ),
    ]
    (d / f"{sid}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))


if __name__ == "__main__":
    dsh_samples()
    codex_sample()
    claude_sample()
    print(f"samples written under {OUT}")
