"""Write the labelled cross-project set for `bench/bench_scope.py`: sessions from four projects
(DSH, Codex, Claude Code) where the user gives rules for one repository and a few preferences
for every repository, and `labels.json` saying which is which.

    python bench/scope/make_sessions.py

Labels: `projects` (name → the sessions' cwd, the project root as recorded: these paths do not
exist on the bench machine), `project_rules` (per project, strings that must reach that
project's injection and no other's), `global_rules` (strings every project's injection must
hold: stated as general by the user, or recurring in two projects).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "tools"))

from make_samples import T0, Claude, Codex, Dsh  # noqa: E402

OUT = HERE / "sessions"
DAY = 86_400_000
P = {
    "ledger": "/home/demo/src/ledger",
    "weather": "/home/demo/src/weather-cli",
    "infra": "/home/demo/src/infra",
    "webapp": "/home/demo/src/webapp",
}

LABELS = {
    "projects": P,
    "sessions": {},
    # what must be found (case-insensitive) in an injection, per rule
    "project_rules": {
        "ledger": ["pnpm, not npm", "migrations from a laptop"],
        "weather": ["`uv run pytest`, not plain pytest"],
        "infra": ["`terraform plan` before apply"],
        "webapp": ["tabs, not spaces"],
    },
    "global_rules": [
        "commit messages in English",  # stated as general ("always … in every repo")
        "no emojis in commit messages",  # stated as general ("everywhere")
        "`make check` passes before you stop",  # recurs in ledger and webapp
    ],
}


def session(sid: str, project: str, what: str) -> None:
    LABELS["sessions"][sid] = {"project": project, "what": what}


def ledger() -> None:
    sid = "1a2b3c4d-0001-4000-8000-00000000a001"
    session(sid, "ledger", "deploy to staging; two ledger rules and one global preference")
    s = Dsh(sid, P["ledger"], T0 + 10 * DAY, out=OUT)
    s.user(
        "Deploy the ledger service to staging. Use pnpm, not npm. "
        "Never run database migrations from a laptop. I always want commit messages in English, in every repo."
    )
    s.tool("bash", {"command": "pnpm install"}, "Packages: +412\nDone in 8.1s")
    s.tool("bash", {"command": "pnpm run deploy:staging"}, "deployed ledger@staging (build 3141)")
    s.say("Deployed the ledger service to staging with `pnpm run deploy:staging`; build 3141 is live.")
    s.end()
    s.write()
    sid = "1a2b3c4d-0002-4000-8000-00000000a002"
    session(sid, "ledger", "rounding fix; `make check` (recurs in webapp)")
    s = Dsh(sid, P["ledger"], T0 + 11 * DAY, out=OUT)
    s.user("The invoice total test fails on rounding. Fix it. Make sure `make check` passes before you stop.")
    s.tool(
        "bash", {"command": "make test"}, "FAILED tests/test_invoice.py::test_total - 10.004 != 10.0\n[exit code: 1]"
    )
    s.say("The total is summed in floats; I switched it to integer cents in `ledger/invoice.py`.")
    s.tool("edit", {"file_path": "ledger/invoice.py", "old_string": "float(", "new_string": "cents("}, "ok")
    s.tool("bash", {"command": "make check"}, "ruff ok\nmypy ok\n42 passed")
    s.say("Fixed: totals are now integer cents and `make check` passes (42 tests).")
    s.end()
    s.write()


def weather() -> None:
    sid = "019b2c3d-0003-7e00-8000-00000000b003"
    session(sid, "weather", "--units flag; one weather rule and one global preference")
    s = Codex(sid, P["weather"], "2026-11-05", out=OUT)
    s.user(
        "Add a --units flag to the forecast command. Use `uv run pytest`, not plain pytest. "
        "I prefer no emojis in commit messages, everywhere."
    )
    s.shell(["bash", "-lc", "uv run pytest -q"], "15 passed in 1.9s")
    s.say("Added `--units metric|imperial` to `weather-cli forecast`; `uv run pytest -q` passes (16 tests).")
    s.shell(["bash", "-lc", "uv run pytest -q"], "16 passed in 2.0s")
    s.write()


def infra() -> None:
    sid = "2c3d4e5f-0004-4a00-8000-00000000c004"
    session(sid, "infra", "provider bump; 'always … in this repo' stays in infra")
    s = Claude(sid, P["infra"], "2026-11-06", out=OUT)
    s.user(
        "Bump the AWS provider to 5.80. Always run `terraform plan` before apply in this repo. "
        "I prefer no emojis in commit messages, everywhere."
    )
    s.tool("Bash", {"command": "terraform init -upgrade"}, "Terraform has been successfully initialized!")
    s.tool("Bash", {"command": "terraform plan"}, "Plan: 0 to add, 2 to change, 0 to destroy.")
    s.say("Bumped the AWS provider to 5.80; `terraform plan` shows 2 changes and nothing destroyed.")
    s.write()


def webapp() -> None:
    sid = "3d4e5f6a-0005-4b00-8000-00000000d005"
    session(sid, "webapp", "login fix; one webapp rule, `make check` again, English everywhere")
    s = Dsh(sid, P["webapp"], T0 + 12 * DAY, out=OUT)
    s.user(
        "The login page shows a blank screen after submit. Fix it. Use tabs, not spaces. "
        "Make sure `make check` passes before you stop. I always want commit messages in English, in every repo."
    )
    s.tool(
        "bash", {"command": "npm test"}, "FAIL src/login.test.js: Cannot read properties of undefined\n[exit code: 1]"
    )
    s.say("The submit handler read `res.user` before the response arrived; I awaited the fetch in `src/login.js`.")
    s.tool("edit", {"file_path": "src/login.js", "old_string": "fetch(", "new_string": "await fetch("}, "ok")
    s.tool("bash", {"command": "make check"}, "eslint ok\n31 passed")
    s.say("Fixed: the login submit now waits for the response; `make check` passes.")
    s.end()
    s.write()


def main() -> None:
    import shutil

    shutil.rmtree(OUT, ignore_errors=True)
    for make in (ledger, weather, infra, webapp):
        make()
    (HERE / "labels.json").write_text(json.dumps(LABELS, indent=1) + "\n")


if __name__ == "__main__":
    main()
