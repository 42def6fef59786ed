"""The repo tests itself: a copy of the tracked files, with nothing beside it, collects and passes.

The copy lands in `tmp_path/lonely/repo`, so `../shared/fixtures` does not exist there: every
fixture must come from the repo (tests/fixtures/corpus), and the shared-corpus conformance
variants must be skipped with their reason rather than fail or vanish.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import SHARED_SKIP_REASON

REPO = Path(__file__).resolve().parents[1]
MIN_COLLECTED = 400  # the suite collects ~1,500 today; far fewer means whole modules went missing

# One pytest process over the whole suite (`python -m pytest`, as CI runs it): it collects every
# test, reports how many, then runs only the corpus tier, the tests that take the `corpus`
# fixture: they read every file of the in-repo snapshot and each has a `[shared-…]` variant that
# must skip here. The rest of the suite runs in the main run; repeating it in the copy proves
# nothing more about the copy. The probe also reports where `dsh_memory` and `tests` came from.
PROBE = """
import sys, pytest
class Probe:
    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config, items):
        ids = [item.nodeid for item in items]
        repo, shared = sum("[repo" in i for i in ids), sum("[shared" in i for i in ids)
        print(f"\\nCOLLECTED {len(items)} repo={repo} shared={shared}")
        tier, rest = [], []
        for item in items:
            (tier if "corpus" in getattr(item, "fixturenames", ()) else rest).append(item)
        config.hook.pytest_deselected(items=rest)
        items[:] = tier
    def pytest_sessionfinish(self, session):
        import dsh_memory, tests
        print(f"\\nPROBE dsh_memory={dsh_memory.__file__} tests={tests.__file__}")
sys.exit(pytest.main(sys.argv[1:], plugins=[Probe()]))
"""


def _tracked_files() -> list[str]:
    if shutil.which("git") is None:
        pytest.skip("git is not installed: cannot list the tracked files")
    top = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--show-toplevel"], capture_output=True, text=True)
    if top.returncode != 0 or Path(top.stdout.strip()).resolve() != REPO:
        pytest.skip(f"{REPO} is not the top of a git checkout: nothing to copy")
    out = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z"], capture_output=True, check=True).stdout
    return [p for p in os.fsdecode(out).split("\0") if p]


def _copy_tracked(dst: Path) -> int:
    copied = 0
    for rel in _tracked_files():
        src = REPO / rel
        if not src.exists() and not src.is_symlink():  # deleted in the work tree, not yet committed
            continue
        (dst / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst / rel, follow_symlinks=False)
        copied += 1
    return copied


def _child_env(copy: Path) -> dict[str, str]:
    """This environment minus anything a test run may have pointed elsewhere; imports from the copy."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "DSH_", "PYTEST_", "PYTHON"))}
    env["PYTHONPATH"] = str(copy)  # like an editable install of the copy (subprocesses import it too)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _run(args: list[str], copy: Path, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args], cwd=copy, env=_child_env(copy), capture_output=True, text=True, timeout=timeout
    )


def test_a_lonely_copy_collects_everything_and_passes_the_corpus_tier(tmp_path):
    copy = tmp_path / "lonely" / "repo"
    assert _copy_tracked(copy) > 50
    assert (copy / "tests" / "fixtures" / "corpus" / "expected.json").is_file(), "the fixture corpus is not tracked"
    assert sorted(p.name for p in copy.parent.iterdir()) == ["repo"]  # nothing beside it
    shared = copy.parent / "shared" / "fixtures"

    run = _run(["-c", PROBE, "-q", "-rs", "-p", "no:cacheprovider"], copy, timeout=600)
    report = run.stdout + run.stderr
    assert run.returncode == 0, report[-6000:]  # a collection error alone makes it 2
    assert not re.search(r"^ERROR ", report, re.M), report[-4000:]
    collected = re.search(r"^COLLECTED (\d+) repo=(\d+) shared=(\d+)$", run.stdout, re.M)
    assert collected, report[-4000:]
    assert int(collected.group(1)) >= MIN_COLLECTED, collected.group(0)
    assert int(collected.group(2)) and int(collected.group(3)), f"conformance variants not collected: {collected[0]}"
    probe = re.search(r"^PROBE dsh_memory=(\S+) tests=(\S+)$", run.stdout, re.M)
    assert probe, report[-4000:]
    assert Path(probe.group(1)) == copy / "dsh_memory" / "__init__.py", "the copy imported another dsh_memory"
    assert Path(probe.group(2)) == copy / "tests" / "__init__.py", "the copy imported another tests package"

    finals = [line for line in run.stdout.splitlines() if re.search(r"^\d+ \w+.* in [\d.]+s", line)]
    assert finals, report[-4000:]
    final = finals[-1]  # "N passed, M skipped, K deselected in Xs"
    assert re.search(r"\d+ passed", final) and "failed" not in final and "error" not in final, final
    skipped = re.search(r"(\d+) skipped", final)
    reason = SHARED_SKIP_REASON.format(path=shared)
    skip_lines = [line for line in run.stdout.splitlines() if line.startswith("SKIPPED") and reason in line]
    assert skipped and skip_lines, report[-4000:]
    counted = sum(int(m.group(1)) for line in skip_lines if (m := re.match(r"SKIPPED \[(\d+)\]", line)))
    assert counted == int(skipped.group(1)) >= 20, (counted, final)  # every skip is the missing shared corpus
