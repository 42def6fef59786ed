"""Chaos: `kill -9` of `dsh-memory run` at random points of Phase 1 and Phase 2, then a plain rerun.

Each trial copies a small session set (the five bundled samples plus clones of a DSH sample)
into a fresh folder, starts `python -m dsh_memory.cli run` (Phase 1 then Phase 2, on Prefect's
temporary in-process server) against a fake model that answers each call in 0.2–1.0 s, kills it
with SIGKILL at one random point, then runs `dsh-memory run` again — plainly, same environment,
no waiting — to completion, and checks what is left:

  torn      a memory file that is not a complete write: rollout summary front matter, raw-block
            lengths and hashes, `v1` on the summary's first line, the fake's closing line, UTF-8,
            the state database's integrity check
  lost      a session claimed done whose raw block or rollout summary is missing, or a raw block
            present after the kill that is neither in raw_memories.md nor archived after the rerun
  double    two rollout summaries or two raw blocks for one (session, part); a claim with more
            than one part (the sessions never grow)
  orphans   processes of the killed run (or of the rerun) still alive after the rerun — Prefect
            servers, uvicorn, their watchers — found in /proc by this harness's PREFECT_HOME and
            their start time
  temp      `.<name>.<random>.tmp` files under the memory root after the rerun
  stuck     sessions that are not done/noop after the rerun (or a rerun that failed);
            `unconsolidated`: raw blocks still wait or the pending flag is still set after it

Kill points, one per trial, in rounds (each mode once per round of seven, in random order):
`startup` (before the first model call), `p1-call` (during a Phase 1 model call), `p1-reply`
(just after a Phase 1 answer, while its files are written), `p1-write` (the moment a temp file
of an atomic write appears), and `p2-call`, `p2-reply`, `p2-write` for Phase 2. The rerun time
is printed as a ratio against a clean, unkilled run measured first in the same invocation
(after a warm-up run that migrates the harness's own PREFECT_HOME).

    python bench/chaos.py [--trials 100] [--seed 1] [--modes p1-write,p2-call] [--max-minutes M] [--keep-failed]

`--seed` fixes the kill plan and the fake model's choices; where a kill lands still depends on
timing. Exit status 1 when any counter is non-zero (the offending trials are listed).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from dsh_memory.storage.store_format import (  # noqa: E402 (after the path set-up)
    RAW_ARCHIVE_TITLE,
    RAW_TITLE,
    parse_front_matter,
    parse_raw_blocks,
    serialize_raw_block,
)
from dsh_memory.testing.fake_openai import FakeOpenAIServer, Reply  # noqa: E402

sys.path.insert(0, str(REPO / "bench"))
from _sessions import SAMPLES, age_all, clone_dsh_sample, quoting_answer  # noqa: E402

END_LINE = "End of chaos text."  # the fake's closing line in every Phase 2 file: missing = cut
TEMP_RE = re.compile(r"^\..+\.[A-Za-z0-9_]{6,}\.tmp$")  # what an atomic write's temp file looks like
MODES = ("startup", "p1-call", "p1-reply", "p1-write", "p2-call", "p2-reply", "p2-write")
COUNTERS = ("torn", "lost", "double", "orphans", "temp", "stuck", "unconsolidated")
RUN_TIMEOUT_S = 600.0


# ---- the session set ------------------------------------------------------------------------


def make_sessions(dst: Path, clones: int) -> None:
    """The bundled samples (3 DSH, 1 Codex, 1 Claude Code) plus `clones` copies of a DSH sample
    with new ids and their own wording, dated an hour ago (idle, ready to extract)."""
    for sub in ("dsh", "codex", "claude"):
        shutil.copytree(SAMPLES / sub, dst / sub)
    clone_dsh_sample(dst / "dsh", clones, prefix="chaos")
    age_all(dst)


# ---- the fake model -------------------------------------------------------------------------


@dataclass
class Call:
    arrived: float  # time.monotonic() at arrival
    tool: str
    delay: float

    @property
    def answered(self) -> float:
        return self.arrived + self.delay


class ChaosModel:
    """Answers `memory_save` with lines quoted from the session (and a slug that varies from call
    to call, as a real model's does) and `memory_write` with a small handbook ending in END_LINE.
    Every call waits a random 0.2–1.0 s, so kills land mid-call; arrivals are recorded."""

    def __init__(self, seed: int, latency: tuple[float, float]):
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self.latency = latency
        self.calls: list[Call] = []

    def reset(self) -> None:
        with self._lock:
            self.calls = []

    def snapshot(self) -> list[Call]:
        with self._lock:
            return list(self.calls)

    def __call__(self, request: dict) -> Reply:
        tool = ((request.get("tool_choice") or {}).get("function") or {}).get("name") or (
            ((request.get("tools") or [{}])[0].get("function") or {}).get("name") or ""
        )
        with self._lock:
            delay = self._rng.uniform(*self.latency)
            variant = self._rng.choice(("fix", "session", "work", "task"))
            self.calls.append(Call(time.monotonic(), tool, delay))
        if tool == "memory_write":
            return Reply.tool(_handbook(), delay_seconds=delay)
        return Reply.tool(quoting_answer(request, variant), delay_seconds=delay)


def _handbook() -> dict:
    return {
        "memory_md": f"# Handbook\n\n## Testing\n- Run the project's own test command first.\n\n{END_LINE}\n",
        "memory_summary_md": f"v1\n\n## Chaos\n- The handbook is in MEMORY.md.\n\n{END_LINE}\n",
        "skills": [
            {
                "name": "chaos-check",
                "skill_md": f"---\nname: chaos-check\ndescription: check a change\n---\n# Check\n1. Run the tests.\n\n{END_LINE}\n",
                "files": [{"path": "scripts/check.sh", "content": f"#!/bin/sh\nmake test\n# {END_LINE}\n"}],
            }
        ],
        "remove_skills": [],
        "retire_summaries": [],
    }


# ---- processes --------------------------------------------------------------------------------


def run_env(work: Path, trial_dir: Path, base_url: str) -> dict[str, str]:
    drop = ("DSH_", "CODEX_", "CLAUDE_", "DEEPSEEK_", "PREFECT_", "COLUMNS")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env.update(
        HOME=str(work / "home"),
        PREFECT_HOME=str(work / "prefect"),
        PREFECT_LOGGING_LEVEL="WARNING",
        DSH_HOME=str(trial_dir / "dsh"),
        CODEX_HOME=str(trial_dir / "codex"),
        CLAUDE_CONFIG_DIR=str(trial_dir / "claude"),
        DSH_MEMORY_ROOT=str(trial_dir / "memories"),
        DSH_MEMORY_BASE_URL=base_url,
        DSH_MEMORY_API_KEY="chaos",
        DSH_MEMORY_MODEL="fake-model",
        DSH_MEMORY_MAX_ROLLOUT_AGE_DAYS="0",
        DSH_MEMORY_PHASE2_COOLDOWN_SECONDS="0",  # so Phase 2 runs: the harness's configuration
    )
    return env


def spawn(env: dict[str, str], log: Path) -> subprocess.Popen:
    out = open(log, "ab")
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "dsh_memory.cli", "run"],
            cwd=str(REPO),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    finally:
        out.close()


def run_to_end(env: dict[str, str], log: Path) -> tuple[int, float]:
    """A plain `dsh-memory run`; (exit code, wall seconds). A hung run is killed (exit -9)."""
    t0 = time.monotonic()
    proc = spawn(env, log)
    try:
        rc = proc.wait(timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        rc = -9
    finally:
        if proc.poll() is None:  # hung, or the harness was interrupted
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return rc, time.monotonic() - t0


def _boot_time() -> float:
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith("btime "):
            return float(line.split()[1])
    return 0.0


def stragglers(prefect_home: str, since: float) -> list[tuple[int, str]]:
    """Live processes started at or after `since` (epoch seconds) whose environment carries this
    harness's PREFECT_HOME: every process a CLI run of this harness started, whatever it is."""
    needle = f"PREFECT_HOME={prefect_home}".encode()
    boot, hz = _boot_time(), os.sysconf("SC_CLK_TCK")
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            env = Path(entry.path, "environ").read_bytes().split(b"\0")
            fields = Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()
            cmd = Path(entry.path, "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if needle not in env or fields[0] == "Z":
            continue
        if boot + int(fields[19]) / hz >= since - 1:
            found.append((int(entry.name), cmd.strip()[:160]))
    return found


def wait_for_no_stragglers(prefect_home: str, since: float, grace_s: float) -> list[tuple[int, str]]:
    deadline = time.monotonic() + grace_s
    while True:
        left = stragglers(prefect_home, since)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.2)


# ---- the memory root's checks ------------------------------------------------------------------


@dataclass
class Snapshot:
    raw_ids: set[str]


def read_blocks(root: Path) -> tuple[list, list]:
    def blocks(name: str) -> list:
        p = root / name
        return parse_raw_blocks(p.read_text(encoding="utf-8", errors="replace")) if p.exists() else []

    return blocks("raw_memories.md"), blocks("raw_memories.archive.md")


def claims(root: Path) -> tuple[dict[str, dict], dict]:
    db = root / ".state" / "state.sqlite3"
    if not db.exists():
        return {}, {}
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    conn.row_factory = sqlite3.Row
    try:
        rows = {r["session_id"]: dict(r) for r in conn.execute("SELECT * FROM claims")}
        meta = dict(conn.execute("SELECT * FROM pipeline WHERE id=1").fetchone() or {})
        return rows, meta
    finally:
        conn.close()


def torn_files(root: Path, markers: dict[str, bool]) -> list[str]:
    """Every memory file that is not a complete write. `markers[kind]`: the clean run's file of
    that kind ends with END_LINE, so this one must too."""
    bad: list[str] = []
    for p in sorted(root.rglob("*")):
        if not p.is_file() or ".state" in p.relative_to(root).parts or TEMP_RE.match(p.name):
            continue
        rel = p.relative_to(root).as_posix()
        try:
            text = p.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            bad.append(f"{rel}: not UTF-8")
            continue
        if rel.startswith("rollout_summaries/") and p.suffix == ".md":
            fields, body = parse_front_matter(text)
            if not text.startswith("---\n") or fields.get("session_id") is None or fields.get("part") is None:
                bad.append(f"{rel}: no provenance front matter")
            elif not body.strip() or not text.endswith("\n"):
                bad.append(f"{rel}: body cut")
        elif rel in ("raw_memories.md", "raw_memories.archive.md"):
            title = RAW_TITLE if rel == "raw_memories.md" else RAW_ARCHIVE_TITLE
            again = title + "".join(serialize_raw_block(b) for b in parse_raw_blocks(text))
            if again != text:
                bad.append(f"{rel}: raw blocks do not parse back to the file (cut or mangled)")
        elif rel in ("MEMORY.md", "memory_summary.md") or rel.startswith("skills/"):
            kind = "summary" if rel == "memory_summary.md" else rel.split("/")[-1]
            if rel == "memory_summary.md" and text.split("\n", 1)[0] != "v1":
                bad.append(f"{rel}: first line is not v1")
            elif not text.endswith("\n") or (markers.get(kind) and END_LINE not in text.rstrip().splitlines()[-1]):
                bad.append(f"{rel}: ends mid-write")
    db = root / ".state" / "state.sqlite3"
    if db.exists():
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
        try:
            verdict = conn.execute("PRAGMA integrity_check").fetchone()[0]
        finally:
            conn.close()
        if verdict != "ok":
            bad.append(f".state/state.sqlite3: {verdict}")
    return bad


def end_markers(root: Path) -> dict[str, bool]:
    """Which Phase 2 files of a clean run end with the fake's closing line."""
    found = {}
    for p in [root / "MEMORY.md", root / "memory_summary.md", *root.glob("skills/*/*"), *root.glob("skills/*/*/*")]:
        if p.is_file():
            kind = "summary" if p.name == "memory_summary.md" else p.name
            lines = p.read_text().rstrip().splitlines()
            found[kind] = bool(lines) and END_LINE in lines[-1]
    return found


def summaries(root: Path) -> list[tuple[str, str, str]]:
    """(file, session id, part) of every rollout summary, active and retired."""
    out = []
    for d in (root / "rollout_summaries", root / "rollout_summaries" / ".retired"):
        for p in sorted(d.glob("*.md")) if d.is_dir() else []:
            fields, _ = parse_front_matter(p.read_text(encoding="utf-8", errors="replace"))
            out.append((p.relative_to(root).as_posix(), str(fields.get("session_id")), str(fields.get("part"))))
    return out


@dataclass
class Findings:
    counts: Counter = field(default_factory=Counter)
    details: list[str] = field(default_factory=list)

    def add(self, counter: str, items: list[str]) -> None:
        if items:
            self.counts[counter] += len(items)
            self.details += [f"{counter}: {x}" for x in items]


def check(root: Path, after_kill: Snapshot, expected: set[str], markers: dict[str, bool], rerun_rc: int) -> Findings:
    f = Findings()
    f.add("torn", torn_files(root, markers))
    raw, archive = read_blocks(root)
    rows, meta = claims(root)
    kept = Counter(b.id for b in raw) + Counter(b.id for b in archive)
    files = summaries(root)
    by_part = Counter((sid, part) for _, sid, part in files)

    lost = [
        f"raw block {i} vanished (neither in raw_memories.md nor archived)"
        for i in sorted(after_kill.raw_ids - set(kept))
    ]
    for sid, c in sorted(rows.items()):
        if c["status"] != "done":
            continue
        for part in range(1, c["parts"] + 1):
            if f"{sid}#{part}" not in kept:
                lost.append(f"session {sid} part {part} is done but has no raw block")
            if by_part[(sid, str(part))] == 0:
                lost.append(f"session {sid} part {part} is done but has no rollout summary")
    f.add("lost", lost)

    double = [f"{n} rollout summaries for session {sid} part {part}" for (sid, part), n in by_part.items() if n > 1]
    double += [f"raw block {i} kept {n} times" for i, n in kept.items() if n > 1]
    double += [f"session {sid} extracted {c['parts']} times" for sid, c in rows.items() if c["parts"] > 1]
    f.add("double", sorted(double))

    temps = [p.relative_to(root).as_posix() for p in root.rglob("*") if TEMP_RE.match(p.name)]
    f.add("temp", sorted(temps))

    status = {sid: (rows[sid]["status"] if sid in rows else "no claim") for sid in sorted(expected)}
    stuck = [f"{sid}: {s}" for sid, s in status.items() if s not in ("done", "noop")]
    if rerun_rc != 0:
        stuck.append(f"the rerun exited {rerun_rc}")
    f.add("stuck", stuck)

    if raw or meta.get("pending_consolidation"):
        f.add("unconsolidated", [f"{len(raw)} raw blocks wait, pending flag {meta.get('pending_consolidation')}"])
    return f


# ---- one trial -----------------------------------------------------------------------------------


@dataclass
class Anchor:
    """What a clean run looks like: its wall time and when its calls happen."""

    wall_s: float
    first_call_s: float  # from spawn to the first model call
    p1_calls: int
    p1_span_s: float  # first Phase 1 call to the last Phase 1 answer
    expected: set[str]
    markers: dict[str, bool]
    name: str = "clean"


@dataclass
class Plan:
    mode: str
    pick: float  # which call (a fraction of the clean run's calls) or where in a window
    frac: float  # where in the call / after the answer


@dataclass
class TrialResult:
    index: int
    plan: Plan
    landed: str  # what the kill hit, or "the run finished first"
    rerun_s: float
    findings: Findings
    dir: Path


def _scan_temp(root: Path) -> bool:
    for _dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".state"]
        if any(TEMP_RE.match(n) for n in filenames):
            return True
    return False


def kill_at(proc: subprocess.Popen, plan: Plan, model: ChaosModel, anchor: Anchor, root: Path, spawned: float) -> str:
    """Wait for the planned point, SIGKILL the CLI there. Returns what the kill hit."""

    def alive() -> bool:
        return proc.poll() is None

    def calls(tool: str) -> list[Call]:
        return [c for c in model.snapshot() if c.tool == tool]

    def wait_until(cond, timeout: float = RUN_TIMEOUT_S, step: float = 0.01) -> bool:
        deadline = time.monotonic() + timeout
        while alive() and time.monotonic() < deadline:
            if cond():
                return True
            time.sleep(step)
        return False

    def sleep_until(t: float) -> None:
        while alive() and time.monotonic() < t:
            time.sleep(min(0.01, max(0.0, t - time.monotonic())))

    mode = plan.mode
    if mode == "startup":
        sleep_until(spawned + 0.3 + plan.frac * max(0.0, anchor.first_call_s - 0.3))
        if not alive():
            return "the run finished first"
        what = "startup" if not model.snapshot() else "startup (a model call had begun)"
    elif mode in ("p1-call", "p1-reply", "p2-call", "p2-reply"):
        tool = "memory_save" if mode.startswith("p1") else "memory_write"
        k = min(int(plan.pick * anchor.p1_calls), anchor.p1_calls - 1) if tool == "memory_save" else 0
        if not wait_until(lambda: len(calls(tool)) > k):
            return "the run finished first"
        c = calls(tool)[k]
        target = c.arrived + plan.frac * c.delay if mode.endswith("call") else c.answered + plan.frac * 0.5
        sleep_until(target)
        what = f"{mode} (call {k + 1})"
    else:  # p1-write / p2-write: the moment an atomic write's temp file exists
        if mode == "p1-write":
            if not wait_until(lambda: bool(calls("memory_save"))):
                return "the run finished first"
            sleep_until(calls("memory_save")[0].arrived + plan.frac * anchor.p1_span_s)
        else:
            if not wait_until(lambda: bool(calls("memory_write"))):
                return "the run finished first"
            sleep_until(calls("memory_write")[0].answered - 0.05)
        if not wait_until(lambda: _scan_temp(root), step=0.0):
            return "the run finished first"
        what = f"{mode} (temp file present)"
    if not alive():
        return "the run finished first"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return what


def trial(
    index: int, plan: Plan, work: Path, model: ChaosModel, fake_url: str, anchor: Anchor, clones: int
) -> TrialResult:
    tdir = work / f"trial-{index:03d}"
    make_sessions(tdir, clones)
    env = run_env(work, tdir, fake_url)
    root = tdir / "memories"
    since = time.time()
    model.reset()
    spawned = time.monotonic()
    proc = spawn(env, tdir / "killed.log")
    try:
        landed = kill_at(proc, plan, model, anchor, root, spawned)
    finally:
        if proc.poll() is None:  # the harness itself was interrupted
            proc.kill()
        proc.wait()
    raw, archive = read_blocks(root)
    after_kill = Snapshot(raw_ids={b.id for b in raw} | {b.id for b in archive})
    model.reset()
    rc, rerun_s = run_to_end(env, tdir / "rerun.log")
    findings = check(root, after_kill, anchor.expected, anchor.markers, rc)
    left = wait_for_no_stragglers(env["PREFECT_HOME"], since, grace_s=10.0)
    findings.add("orphans", [f"pid {pid}: {cmd}" for pid, cmd in left])
    for pid, _ in left:  # do not let them disturb the next trial
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return TrialResult(index, plan, landed, rerun_s, findings, tdir)


# ---- the whole run ---------------------------------------------------------------------------


@contextmanager
def _reaping(prefect_home: str, since: float):
    """On the way out (an interrupted harness too), no process of this harness's runs survives."""
    try:
        yield
    finally:
        for pid, _ in stragglers(prefect_home, since):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def measure_anchor(work: Path, model: ChaosModel, fake_url: str, clones: int, name: str) -> Anchor:
    tdir = work / name
    make_sessions(tdir, clones)
    env = run_env(work, tdir, fake_url)
    model.reset()
    t0 = time.monotonic()
    rc, wall = run_to_end(env, tdir / "run.log")
    if rc != 0:
        raise SystemExit(f"the clean run failed (exit {rc}); see {tdir / 'run.log'}")
    calls = model.snapshot()
    p1 = [c for c in calls if c.tool == "memory_save"]
    rows, _ = claims(tdir / "memories")
    bad = {s: c["status"] for s, c in rows.items() if c["status"] not in ("done", "noop")}
    if not p1 or bad or not any(c.tool == "memory_write" for c in calls):
        raise SystemExit(f"the clean run did not extract and consolidate everything ({bad}); see {tdir}")
    return Anchor(
        wall_s=wall,
        first_call_s=min(c.arrived for c in calls) - t0,
        p1_calls=len(p1),
        p1_span_s=max(c.answered for c in p1) - min(c.arrived for c in p1),
        expected=set(rows),
        markers=end_markers(tdir / "memories"),
        name=name,
    )


def run_chaos(
    trials: int,
    seed: int,
    clones: int = 3,
    latency: tuple[float, float] = (0.2, 1.0),
    work: Path | None = None,
    keep_failed: bool = False,
    modes: tuple[str, ...] = MODES,
    measure_clean: bool = True,
    max_minutes: float | None = None,
    out=sys.stdout,
) -> dict:
    """Run the harness; returns {"trials", "counts", "ratios", "results", "anchor_s"}. Kill points
    are drawn in rounds: each round of len(modes) trials uses every mode once, in random order.
    `measure_clean=False` skips the separate clean run (the warm-up, which also migrates
    PREFECT_HOME, is then the anchor: quicker, and the ratios mean little)."""
    own_work = work is None
    work = Path(tempfile.mkdtemp(prefix="dsh-chaos-")) if work is None else work
    (work / "home").mkdir(parents=True, exist_ok=True)
    plan_rng = random.Random(seed)
    model = ChaosModel(seed, latency)
    results: list[TrialResult] = []
    started, since = time.monotonic(), time.time()
    with FakeOpenAIServer(handler=model) as fake, _reaping(str(work / "prefect"), since):
        # A killed client resets its connection mid-answer: expected here, not worth a traceback.
        fake._httpd.handle_error = lambda request, client_address: None
        print(f"chaos: work folder {work}; warm-up run (migrates PREFECT_HOME)…", file=out, flush=True)
        anchor = measure_anchor(work, model, fake.base_url, clones, "warm-up")
        if measure_clean:
            anchor = measure_anchor(work, model, fake.base_url, clones, "clean")
        print(
            f"chaos: {anchor.name} run {anchor.wall_s:.1f} s ({len(anchor.expected)} sessions, {anchor.p1_calls} Phase 1 "
            f"calls, first call after {anchor.first_call_s:.1f} s)",
            file=out,
            flush=True,
        )
        order: list[str] = []
        for i in range(1, trials + 1):
            if max_minutes is not None and time.monotonic() - started > max_minutes * 60:
                print(f"chaos: {max_minutes:g} min budget spent: stopping after {i - 1} trials", file=out, flush=True)
                break
            if not order:
                order = list(modes)
                plan_rng.shuffle(order)
            plan = Plan(mode=order.pop(), pick=plan_rng.random(), frac=plan_rng.random())
            r = trial(i, plan, work, model, fake.base_url, anchor, clones)
            results.append(r)
            bad = sum(r.findings.counts.values())
            print(
                f"trial {i:3d}/{trials}  {plan.mode:8s} → {r.landed:36s} rerun {r.rerun_s:5.1f} s"
                + (f"  FINDINGS: {'; '.join(r.findings.details)}" if bad else ""),
                file=out,
                flush=True,
            )
            if not bad or not keep_failed:
                shutil.rmtree(r.dir, ignore_errors=True)
    counts = Counter()
    for r in results:
        counts.update(r.findings.counts)
    ratios = [r.rerun_s / anchor.wall_s for r in results]
    report(results, counts, ratios, anchor, time.monotonic() - started, seed, latency, out)
    if own_work and not (keep_failed and any(sum(r.findings.counts.values()) for r in results)):
        shutil.rmtree(work, ignore_errors=True)
    return {
        "trials": len(results),
        "counts": {c: counts.get(c, 0) for c in COUNTERS},
        "ratios": ratios,
        "anchor_s": anchor.wall_s,
        "results": results,
    }


def report(results, counts, ratios, anchor: Anchor, wall_s: float, seed: int, latency, out) -> None:
    landed = Counter(r.plan.mode for r in results if not r.landed.startswith("the run finished"))
    planned = Counter(r.plan.mode for r in results)
    print("", file=out)
    print(
        f"{len(results)} trials (seed {seed}), {len(anchor.expected)} sessions each, fake model "
        f"{latency[0]:.1f}–{latency[1]:.1f} s per call; harness wall {wall_s / 60:.1f} min",
        file=out,
    )
    print(
        "kills landed: "
        + ", ".join(f"{m} {landed[m]}/{planned[m]}" for m in MODES if planned[m])
        + " (the others: the run finished before the planned point, rerun anyway)",
        file=out,
    )
    head = ["trials", *COUNTERS, "rerun ÷ clean (median / max)"]
    ratio = f"{statistics.median(ratios):.2f} / {max(ratios):.2f}" if ratios else "-"
    row = [str(len(results)), *(str(counts.get(c, 0)) for c in COUNTERS), ratio]
    widths = [max(len(h), len(v)) for h, v in zip(head, row, strict=True)]
    print("| " + " | ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)) + " |", file=out)
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|", file=out)
    print("| " + " | ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)) + " |", file=out)
    what = "clean run" if anchor.name == "clean" else "warm-up run, with the PREFECT_HOME migration"
    print(f"anchor ({what}): {anchor.wall_s:.1f} s", file=out)
    for r in results:
        for d in r.findings.details:
            print(f"  trial {r.index} ({r.plan.mode}, {r.landed}): {d}", file=out)


def _interrupted(signum, frame):
    raise KeyboardInterrupt


def main() -> None:
    signal.signal(signal.SIGTERM, _interrupted)  # clean up (below) on kill as on Ctrl-C
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--clones", type=int, default=3, help="extra DSH sessions beside the 5 samples")
    ap.add_argument(
        "--modes", default=",".join(MODES), help=f"kill points to draw from (default: all of {', '.join(MODES)})"
    )
    ap.add_argument("--keep-failed", action="store_true", help="keep the folders of trials with findings")
    ap.add_argument(
        "--max-minutes", type=float, help="start no trial after this many minutes (the table says how many ran)"
    )
    ap.add_argument("--json", type=Path, help="also write the counts and ratios here")
    args = ap.parse_args()
    modes = tuple(m.strip() for m in args.modes.split(",") if m.strip())
    if not modes or set(modes) - set(MODES):
        ap.error(f"--modes: choose from {', '.join(MODES)}")
    result = run_chaos(
        args.trials,
        args.seed,
        clones=args.clones,
        keep_failed=args.keep_failed,
        modes=modes,
        max_minutes=args.max_minutes,
    )
    if args.json:
        args.json.write_text(
            json.dumps({k: result[k] for k in ("trials", "counts", "ratios", "anchor_s")}, indent=2) + "\n"
        )
    sys.exit(1 if any(result["counts"].values()) else 0)


if __name__ == "__main__":
    main()
