"""Session trees and a quoting fake model shared by the benches (chaos, phase 1 throughput).

`clone_dsh_sample(dsh_home, n)` copies one bundled DSH sample `n` times with new ids and their
own wording (project `weather-cli` → `<prefix><i>-cli`, Oslo → `Bergen<i>`), dated an hour ago:
idle, ready to extract, each a real session that passes the no-op gate (tool use, a user rule).

`quoting_answer(request, variant)` is what a model grounded in the session would answer to
`memory_save`: raw memory lines quoted from the user's prompts, a summary and a slug.
"""

from __future__ import annotations

import os
import re
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "dsh_memory" / "samples"
CLONE_ID = "5a1d3c7e-0b2f-4e6a-9c8d-1f2e3a4b5c6d"
CLONE_OF = SAMPLES / "dsh" / "sessions" / "--home-demo-src-weather-cli--" / CLONE_ID


def clone_dsh_sample(dsh_home: Path, n: int, prefix: str = "clone", id_tag: int = 0xC4A05) -> list[str]:
    """`n` copies of the sample under `dsh_home/sessions`; returns their ids."""
    text = CLONE_OF.joinpath("session.v4.jsonl").read_text()
    ids = []
    for i in range(1, n + 1):
        sid = str(uuid.UUID(int=id_tag << 64 | i))
        folder = dsh_home / "sessions" / f"--home-demo-src-{prefix}{i}--" / sid
        folder.mkdir(parents=True)
        clone = text.replace(CLONE_ID, sid).replace("weather-cli", f"{prefix}{i}-cli").replace("Oslo", f"Bergen{i}")
        (folder / "session.v4.jsonl").write_text(clone)
        ids.append(sid)
    age_all(dsh_home)
    return ids


def age_all(root: Path, seconds: float = 3600) -> None:
    """Date every file under `root` `seconds` ago (idle sessions)."""
    old = time.time() - seconds
    for p in root.rglob("*"):
        os.utime(p, (old, old))


def bench_env(work: Path, base_url: str, concurrency: int) -> dict[str, str]:
    """The environment of a Phase 1 bench under `work`: its DSH sessions only, the fake model at
    `base_url`, `concurrency` model slots, sessions of any age."""
    return dict(
        DSH_HOME=str(work / "dsh"),
        CODEX_HOME=str(work / "none"),
        CLAUDE_CONFIG_DIR=str(work / "none"),
        DSH_MEMORY_ROOT=str(work / "memories"),
        DSH_MEMORY_BASE_URL=base_url,
        DSH_MEMORY_API_KEY="bench",
        DSH_MEMORY_MODEL="fake-model",
        DSH_MEMORY_CONCURRENCY=str(concurrency),
        DSH_MEMORY_MAX_ROLLOUT_AGE_DAYS="0",
        PREFECT_LOGGING_LEVEL=os.environ.get("BENCH_LOG", "WARNING"),
    )


def user_lines(request: dict) -> list[str]:
    """The user's prompts as the rendered transcript in a Phase 1 request shows them."""
    text = "\n".join(m.get("content") or "" for m in request.get("messages", []) if m.get("role") == "user")
    return [ln[len("[user] ") :].strip() for ln in text.splitlines() if ln.startswith("[user] ")]


def quoting_answer(request: dict, variant: str = "fix") -> dict:
    """A grounded `memory_save` answer: the first user prompts quoted as raw memory lines."""
    users = user_lines(request) or ["a task"]
    words = re.sub(r"[^A-Za-z0-9 ]+", " ", users[0]).split()[:5]
    return {
        "raw_memory": "\n".join(f"- {u}" for u in users[:3]),
        "rollout_summary": f"## Task\n{users[0]}\n\n## Outcome\ndone",
        "rollout_slug": "-".join([*words, variant]),
    }


class FakeModelProcess:
    """The fake model in a process of its own, as a real endpoint is: the bench's client threads
    do not share its interpreter lock. Answers `quoting_answer` after `latency` seconds; on exit,
    `arrivals` (time.monotonic() of each call, comparable across processes on one host) and
    `max_in_flight` are read back."""

    def __init__(self, latency: float):
        self.latency = latency
        self.arrivals: list[float] = []
        self.max_in_flight = 0
        self.base_url = ""

    def __enter__(self) -> FakeModelProcess:
        import subprocess
        import sys
        import tempfile

        self._stats = Path(tempfile.mkstemp(prefix="dsh-fake-model-", suffix=".json")[1])
        self._proc = subprocess.Popen(
            [sys.executable, __file__, "--serve", str(self.latency), str(self._stats)],
            stdout=subprocess.PIPE,
            text=True,
        )
        self.base_url = self._proc.stdout.readline().strip()
        if not self.base_url:
            raise RuntimeError("the fake model process did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        import json
        import signal

        self._proc.send_signal(signal.SIGTERM)
        self._proc.wait(timeout=30)
        stats = json.loads(self._stats.read_text() or "{}")
        self._stats.unlink(missing_ok=True)
        self.arrivals = stats.get("arrivals", [])
        self.max_in_flight = stats.get("max_in_flight", 0)


def _serve(latency: float, stats_path: str) -> None:
    import json
    import signal
    import sys
    import threading

    sys.path.insert(0, str(REPO))
    from dsh_memory.testing.fake_openai import FakeOpenAIServer, Reply

    arrivals: list[float] = []
    done = threading.Event()

    def reply(request: dict) -> Reply:
        arrivals.append(time.monotonic())
        return Reply.tool(quoting_answer(request))

    signal.signal(signal.SIGTERM, lambda *_: done.set())
    with FakeOpenAIServer(latency_seconds=latency, handler=reply) as fake:
        print(fake.base_url, flush=True)
        done.wait()
        Path(stats_path).write_text(json.dumps({"arrivals": arrivals, "max_in_flight": fake.max_in_flight}))


if __name__ == "__main__":
    import sys

    if sys.argv[1:2] == ["--serve"]:
        _serve(float(sys.argv[2]), sys.argv[3])
