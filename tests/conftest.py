"""Shared test fixtures. The session-log fixtures live outside the repo at ../shared/fixtures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO.parent / "shared" / "fixtures"


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    if not FIXTURES.is_dir():
        pytest.fail(f"shared fixtures not found at {FIXTURES} (expected ../shared/fixtures beside the repo)")
    return FIXTURES


@pytest.fixture(scope="session")
def expected(fixtures_dir: Path) -> dict:
    return json.loads((fixtures_dir / "expected.json").read_text())
