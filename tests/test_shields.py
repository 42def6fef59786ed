"""Failure shields from what real sessions look like: a CLI that answers `{"success": false}`
with exit code 0, the same tool run on another issue (no fix), another tool run on the same issue
(a workaround), a command run without the wrapper that broke it, long prose payloads said as "…"
and commands never cut. Crafted sessions; none is from the benchmark set."""

from __future__ import annotations

import pytest

from dsh_memory.phase1 import steps
from dsh_memory.phase1.commands import normalize_command
from dsh_memory.phase1.evidence import gather
from tests.session_helpers import codex_run, make_session

CWD = "/home/dev/src/shop"


def _bash(cmd: str, out: str = "", error: bool = False):
    return ("tool", "Bash", {"command": cmd}, out, error)


def _edit(path: str, old: str = "a", new: str = "b"):
    return ("tool", "Edit", {"file_path": f"{CWD}/{path}", "old_string": old, "new_string": new}, "ok", False)


def test_a_json_status_reply_with_success_false_is_a_failure_even_with_exit_code_0():
    reply = (
        '{\n  "success": false,\n  "error_type": "token-required",\n'
        '  "message": "Token required. Ensure ${SHOP_TOKEN} is set in the command context."\n}'
    )
    s = make_session(
        ("user", "Publish the release notes."),
        _bash('shopctl notes publish --token="${SHOP_TOKEN}" 2>/dev/null || true', reply),
        _bash('shopctl notes publish --token="tok-123"', '{"success": true, "id": 4}'),
        cwd=CWD,
    )
    (shield,) = gather(s).shields
    assert shield.command == 'shopctl notes publish --token="${SHOP_TOKEN}"'
    assert shield.error == "token-required: Token required. Ensure ${SHOP_TOKEN} is set in the command context."
    assert shield.fix == '`shopctl notes publish --token="tok-123"`'


def test_the_same_tool_on_another_issue_is_no_fix_and_another_tool_on_the_same_issue_is():
    body = "Consolidated into #8865 together with the other plans of this objective"
    s = make_session(
        ("user", "Close the replaced plans."),
        _bash(
            f'shopctl close-plan 7839 --comment "{body}"',
            'Exit code 1\n{"success": false, "error": "PR #7839 not found"}',
        ),
        _bash(f'shopctl close-plan 7825 --comment "{body}"', '{"success": true}'),
        ("assistant", "One failed; closing it with gh instead."),
        _bash(f'gh issue comment 7839 --body "{body}" && gh issue close 7839', "✓ Closed issue #7839"),
        cwd=CWD,
    )
    (shield,) = gather(s).shields
    # a prose payload (a comment body) is said as "…": the command's shape, never half its text
    assert shield.command == 'shopctl close-plan 7839 --comment "…"'
    assert shield.fix == '`gh issue comment 7839 --body "…" && gh issue close 7839`'
    assert "7825" not in shield.fix
    line = steps.raw_memory(gather(s), "x")
    assert "gh issue close 7839" in line and "PR #7839 not found" in line


def test_a_command_that_worked_without_its_wrapper_is_a_shield_and_a_rerun_elsewhere_is_not():
    s = make_session(
        ("user", "Run the tests."),
        _bash(
            "rtk bun run test",
            "Exit code 2\nerror: unrecognized subcommand 'bun'\n\nUsage: rtk [OPTIONS] <COMMAND>",
            True,
        ),
        _bash("bun run test", "1274 pass\n0 fail"),
        _bash("make lint", "Exit code 2\nmake: *** No rule to make target 'lint'.  Stop.", True),
        _bash("bun run lint", "Checked 277 files"),
        cwd=CWD,
    )
    shields = gather(s).shields
    assert [(x.command, x.error, x.fix) for x in shields] == [
        ("rtk bun run test", "error: unrecognized subcommand 'bun'", "`bun run test`")
    ]


def test_a_command_tried_in_several_forms_is_kept_once_in_its_shortest_form_with_the_folder_as_dot():
    s = make_session(
        ("user", "Why does the installer find only one skill?"),
        _bash("npx -y skills@1.5.2 add https://github.com/acme/skills --dry-run", "Found 1 skill"),
        _bash(f"npx -y skills@1.5.2 add {CWD} --list --yes", "Found 4 skills"),
        _bash("npx -y cowsay hello", "< hello >"),
        cwd=CWD,
    )
    assert [c.line for c in gather(s).commands] == ["npx -y skills@1.5.2 add . --list --yes"]


def test_a_duration_is_no_issue_number_and_a_subshell_is_not_cut_in_two():
    s = make_session(
        ("user", "Wait for the review."),
        _bash(
            "sleep 180; gh api repos/acme/shop/pulls/5/comments",
            "<tool_use_error>Blocked: sleep 180 followed by gh api",
            True,
        ),
        _bash("(sleep 180; echo checked; gh api repos/acme/shop/pulls/5/comments) 2>&1", "[]"),
        cwd=CWD,
    )
    ev = gather(s)
    assert ev.shields == []  # the second run is another command, not the same number's workaround
    from dsh_memory.phase1.commands import normalize_command

    assert normalize_command("(sleep 180; echo checked; gh api x) 2>&1", CWD) == "(sleep 180; echo checked; gh api x)"
    assert normalize_command("make test; echo done", CWD) == "make test"


def test_a_command_refused_in_the_foreground_and_run_in_the_background_is_a_shield():
    s = make_session(
        ("user", "Wait for the review."),
        _bash(
            "sleep 180; gh api repos/acme/shop/pulls/5/comments",
            "<tool_use_error>Blocked: sleep 180 followed by: gh api repos/acme/shop/pulls/5/comments",
            True,
        ),
        (
            "tool",
            "Bash",
            {"command": "(sleep 180; echo checked; gh api repos/acme/shop/pulls/5/reviews)", "run_in_background": True},
            "Command running in background with ID: b1en6q7cs.",
            False,
        ),
        cwd=CWD,
    )
    (shield,) = gather(s).shields
    assert shield.command == "sleep 180; gh api repos/acme/shop/pulls/5/comments"
    assert shield.error.startswith("Blocked: sleep 180")  # the tool's error tag left out
    assert shield.fix == "running it in the background (the shell tool's `run_in_background`)"
    line = steps.raw_memory(gather(s), "Wait for the review.")
    assert "`sleep 180; gh api repos/acme/shop/pulls/5/comments` failed" in line and "in the background" in line


def test_what_ran_long_after_a_failure_is_not_its_fix_and_a_hyphenated_add_sets_nothing_up():
    s = make_session(
        ("user", "Implement the plan."),
        _bash('shopctl exec signal started --session-id="${SESSION}"', "Exit code 1\nerror: session id required", True),
        *[_bash(f"shopctl add-label {n} --label done", "ok") for n in range(100, 106)],
        ("assistant", "The labels are not required because `shopctl exec` reads them lazily."),
        *[_bash(f"shopctl add-label {n} --label done", "ok") for n in range(106, 112)],
        _bash('shopctl exec signal ended --session-id="abc-123"', "ok"),
        cwd=CWD,
    )
    (shield,) = gather(s).shields
    assert shield.fix == '`shopctl exec signal ended --session-id="abc-123"`'
    assert shield.cause == ""  # said long after the failure, of something else
    near = make_session(
        ("user", "Tag it."),
        _bash("shopctl tag v1", "Exit code 1\nerror: not logged in", True),
        _bash("shopctl add-label 101 --label x", "ok"),
        _bash("shopctl tag v1", "ok"),
        cwd=CWD,
    )
    assert gather(near).shields == []  # add-label set nothing up: a bare rerun passed


def test_package_folders_do_not_make_another_command_and_instructions_or_options_are_no_facts():
    s = make_session(
        ("user", "Build it."),
        _bash("go build ./cmd/shop/cli/...", ""),
        _bash("go build ./cmd/shop/...", ""),
        _bash("python app.py", "ok"),
        _bash("python tools/seed.py", "ok"),
        _bash("python app.py", "ok"),
        _bash("python tools/seed.py", "ok"),
        (
            "assistant",
            "Either hash without `-w`, or store snapshots in `tmp/` with explicit cleanup because it is safer.\n"
            "Read the `diff` and `context` from the check response because the state is in `state.json`.\n"
            "The snapshots live in `.shop/snapshots/` because the tree must stay clean.",
        ),
        cwd=CWD,
    )
    ev = gather(s)
    assert [c.line for c in ev.commands] == ["go build ./cmd/shop/...", "python app.py", "python tools/seed.py"]
    assert ev.facts == ["The snapshots live in `.shop/snapshots/` because the tree must stay clean."]


def test_a_guess_or_a_sentence_that_leans_on_the_one_before_is_no_fact():
    s = make_session(
        ("user", "Why does the plugin not load?"),
        (
            "assistant",
            "The loader likely doesn't traverse `~/.cursor/plugins/local/` because of WSL.\n"
            "These are the same primitives `Chakra` wraps because it needs no provider.\n"
            "This doesn't solve the gap in `state.json` but it never needs a lock.\n"
            "After `start` or `join`, remember this session is in a collab under `.entire/collab/`.\n"
            "This repo uses `bun` only, because `npm` breaks the lockfile.\n"
            "The manifest at `.cursor-plugin/plugin.json` points to `./skills/` for the skills.",
        ),
        cwd=CWD,
    )
    assert gather(s).facts == [  # a skill's step after a condition is an instruction, not a fact
        "This repo uses `bun` only, because `npm` breaks the lockfile.",
        "The manifest at `.cursor-plugin/plugin.json` points to `./skills/` for the skills.",
    ]


def test_a_package_script_says_what_it_runs_as_its_tool_echoed_it():
    s = make_session(
        ("user", "Rebuild the styles."),
        _bash("bun run css:build", "$ tailwindcss -i ./src/styles.css -o ./dist/output.css\nDone in 303ms."),
        _bash("npm test", "\n> shop@1.0.0 test\n> vitest run\n\n 12 passed"),
        _bash("make lint", "$ ruff check .\nAll checks passed!"),
        cwd=CWD,
    )
    lines = steps.command_lines(gather(s).commands)
    assert lines == [
        "- Checks that passed: `bun run css:build` (runs `tailwindcss -i ./src/styles.css -o ./dist/output.css`), "
        "`npm test` (runs `vitest run`), `make lint`"
    ]


def test_what_a_package_script_ran_is_redacted():
    secret = "sk-live-9fQ2xT7bLm4pZr8vWc3nHy6K"
    s = make_session(
        ("user", "Deploy."),
        _bash("bun run deploy", f"$ STRIPE_KEY={secret} ./scripts/deploy.sh\ndeployed"),
        cwd=CWD,
    )
    (command,) = gather(s).commands
    assert command.script.startswith("STRIPE_KEY=[REDACTED") and secret not in command.script


def test_an_error_line_keeps_its_first_letter_and_pytests_prefix_goes():
    from dsh_memory.phase1.outcome import informative_error

    trace = 'Traceback (most recent call last):\n  File "play.py", line 9, in main\n    input("Press Enter")\n'
    assert informative_error(trace + "EOFError: EOF when reading a line") == "EOFError: EOF when reading a line"
    assert informative_error("Error: Cannot find module 'vite'") == "Error: Cannot find module 'vite'"
    assert informative_error("E       EOFError: EOF when reading a line") == "EOFError: EOF when reading a line"


def test_a_typo_fixed_by_an_edit_is_no_shield_and_an_edit_fix_says_what_it_changed():
    """One script failed twice: a syntax error in the agent's own new code (its typo: nothing for a
    next session) and a prompt that waits on stdin, which an edit replaced with a pause: the shield
    names that failure and the change that fixed it."""
    waits = '        input("\\nPress Enter for the next song...")'
    s = make_session(
        ("user", "Play three songs from the phrases."),
        _bash(
            "python play.py",
            '  File "play.py", line 4\nSyntaxError: unexpected character after line continuation',
            True,
        ),
        (
            "tool",
            "Edit",
            {"file_path": f"{CWD}/play.py", "old_string": "x = '\\\\n'", "new_string": "x = '\\n'"},
            "ok",
            False,
        ),
        _bash(
            "python play.py",
            'Traceback (most recent call last):\n  File "play.py", line 9\nEOFError: EOF when reading a line',
            True,
        ),
        ("assistant", "It works but waits for input."),
        (
            "tool",
            "Edit",
            {"file_path": f"{CWD}/play.py", "old_string": waits, "new_string": "        time.sleep(3)"},
            "ok",
            False,
        ),
        _bash("python play.py", "played 3 songs"),
        cwd=CWD,
    )
    (shield,) = gather(s).shields
    assert shield.error == "EOFError: EOF when reading a line"
    assert shield.fix == 'editing `play.py` (`input("\\nPress Enter for the next song...")` → `time.sleep(3)`)'


def test_a_patch_codex_ran_through_its_shell_is_an_edit_not_a_command():
    patch = (
        "apply_patch <<'PATCH'\n*** Begin Patch\n*** Update File: src/chat.ts\n@@\n-const url = OLLAMA_URL\n"
        "+const url = process.env.LMSTUDIO_URL\n*** End Patch\nPATCH"
    )
    s = make_session(
        ("user", "Switch the chat to LM Studio."),
        (
            "tool",
            "shell",
            {"command": ["bash", "-lc", patch], "workdir": CWD},
            "Success. Updated the following files:\nM src/chat.ts",
            False,
        ),
        cwd=CWD,
    )
    ev = gather(s)
    assert ev.edited == ["src/chat.ts"] and ev.commands == []
    assert "src/chat.ts" in steps.raw_memory(ev, "x")


def test_files_the_agent_calls_unrelated_to_the_work_are_a_fact_a_commit_must_leave_out():
    s = make_session(
        ("user", "Commit the header change."),
        _bash("git add src/Header.tsx && git commit -m 'header'", "[main 1a2b3c4] header"),
        ("assistant", "Committed. The worktree has unrelated changes in `README.md` and `.shop/logs/shop.log`."),
        ("user", "Open the PR."),
        (
            "assistant",
            "The workspace is clean apart from the unrelated untracked tutorial file, and GitHub CLI is available.",
        ),
        cwd=CWD,
    )
    # the files that keep changing are a fact; a passing "unrelated" in a state report is not
    assert gather(s).facts == ["The worktree has unrelated changes in `README.md` and `.shop/logs/shop.log`."]


def test_what_a_thing_cannot_do_outranks_a_fact_that_only_names_more():
    from dsh_memory.phase1.facts import MAX_FACTS, best_facts

    said = [
        "Prices are stored in `db/prices.sql` and read by `pricing.py` through `PriceBook`.",
        "Tax rules live in `conf/tax.toml`, parsed by `taxes.py` into `TaxTable`.",
        "Shipping zones come from `data/zones.json` via `zones.py` and `ZoneMap`.",
        "Coupons are generated in `promo/codes.py`, kept by `CouponStore` in `promo.db`.",
        "Invoices are rendered by `invoice/render.py` with `templates/invoice.html` and `Pdf`.",
        "Webhooks are registered in `hooks/routes.py`, signed by `Signer` with `keys/hook.pem`.",
        "Search is served by `search/index.py` from `var/index.bin` with `Ranker`.",
        "Emails are sent by `mail/send.py` through `SmtpPool` configured in `conf/mail.toml`.",
    ]
    named = [(n, s, False) for n, s in enumerate(said[:MAX_FACTS])]
    limit = (99, "`shopctl explain` only works on checkpoints committed to `var/ckpt`, not on an open session.", False)
    assert limit[1] in best_facts([*named, limit])[:MAX_FACTS]


def test_a_review_checklists_verdict_goes_and_what_it_checked_stays():
    """The unseen TypeScript set injected "Entropy sources correct: `generateEd25519Keypair()` uses
    `crypto.getRandomValues()`, Rust uses `OsRng`" (a review checklist's line); its verdict is that
    day's, what it checked is how the code works."""
    from dsh_memory.phase1.facts import best_facts

    said = [
        "Entropy sources correct: `generateKeypair()` uses `crypto.getRandomValues()`, Rust uses `OsRng`.",
        "The current mitigation is reasonable: discovery walks for `/index.jsonl` instead of checking out `results/`.",
    ]
    assert best_facts([(n, s, True) for n, s in enumerate(said)]) == [
        "`generateKeypair()` uses `crypto.getRandomValues()`, Rust uses `OsRng`.",
        "Discovery walks for `/index.jsonl` instead of checking out `results/`.",
    ]


def test_a_fix_command_is_shown_whole_with_its_query_and_one_too_long_to_show_makes_no_shield():
    query = "{branch: .headRefName, body_length: (.body | length)}"
    s = make_session(
        ("user", "Set up the plan for issue 8124."),
        _bash(
            "shopctl setup-plan --issue 8124", "TypeError: setup_plan() got an unexpected keyword argument 'slug'", True
        ),
        _bash(f"shopctl setup-plan --issue 8124 --jq '{query}'", '{"branch": "plan-8124", "body_length": 4}'),
        cwd=CWD,
    )
    (shield,) = gather(s).shields
    assert shield.fix == f"`shopctl setup-plan --issue 8124 --jq '{query}'`"  # as typed, not cut
    assert "…" not in steps.raw_memory(gather(s), "x")

    long_fix = "shopctl setup-plan --issue 8124 --json " + ",".join(f"field{n}" for n in range(40))
    s = make_session(
        ("user", "Set up the plan for issue 8124."),
        _bash(
            "shopctl setup-plan --issue 8124", "TypeError: setup_plan() got an unexpected keyword argument 'slug'", True
        ),
        _bash(long_fix, "{}"),
        cwd=CWD,
    )
    assert gather(s).shields == []  # a fix that cannot be shown whole is not written half


def test_a_pull_requests_prose_is_said_as_its_shape_whatever_it_holds():
    """Seen on an unseen Vue set: `gh pr create` on a fork failed ("Head sha can't be blank …") until
    it named the upstream (`--repo acme/web --head me:branch`), and no shield was kept: the PR body
    held a code span and a selector (`.go-back-button`), so it read as an expression, stayed whole
    and made the fix too long to show. What a prose flag (`--body`, `--title`, `-m`) carries is
    prose; a query (`--jq`) stays as typed."""
    from dsh_memory.phase1.shields import shown

    body = (
        "## Problem\nThe hover background touches the title.\n\n## Fix\nAdded `margin-right: 8px` to `.go-back-button`."
    )
    title = "fix(portal): add spacing between the back button and the title"
    failed = f'gh pr create --base main --head fix/back-button --title "{title}" --body "{body}"'
    fixed = f'gh pr create --repo acme/web --base main --head me:fix/back-button --title "{title}" --body "{body}"'
    assert shown(f"git commit -m '{body}'") == 'git commit -m "…"'
    s = make_session(
        ("user", "Open a PR for this fix."),
        _bash(failed, "pull request create failed: GraphQL: Head sha can't be blank, Base sha can't be blank", True),
        _bash("git remote -v", "origin git@github.com:me/web.git (fetch)"),
        _bash(fixed, "https://github.com/acme/web/pull/6690"),
        cwd=CWD,
    )
    (shield,) = gather(s).shields
    assert shield.fix == '`gh pr create --repo acme/web --base main --head me:fix/back-button --title "…" --body "…"`'
    query = "gh pr view 12 --jq '{branch: .headRefName, title: .title, body_length: (.body | length)}'"
    assert shown(query) == query


def test_a_call_the_user_turned_down_is_no_failure_and_a_destructive_fix_is_no_lesson():
    """A tool call the user rejected ("The user doesn't want to proceed with this tool use…") did
    not fail and did not run: it was a shield with that text as its error, and a rejected edit was
    in the code map. A failure "fixed" by a force push (or `reset --hard`, `--no-verify`…) is that
    moment's call: obeyed in a later session it loses work, so it is no shield."""
    refused = "The user doesn't want to proceed with this tool use. The tool use was rejected. STOP what you are doing"
    s = make_session(
        ("user", "Push the branch."),
        _bash("git push --force-with-lease origin feat", refused, True),
        ("tool", "Edit", {"file_path": f"{CWD}/README.md", "old_string": "a", "new_string": "b"}, refused, True),
        _bash("git push origin feat", "error: failed to push some refs to 'https://github.com/acme/app.git'", True),
        _bash("git push --force origin feat", "+ 1a2b3c...4d5e6f feat -> feat (forced update)"),
        _bash("git commit -m wip", "error: pre-commit hook failed (ruff)", True),
        _bash("git commit --no-verify -m wip", "[feat 1a2b3c] wip"),
        _bash("python app.py", "ModuleNotFoundError: No module named 'torch'", True),
        _bash("pip install -r requirements.txt", "Successfully installed torch"),
        _bash("python app.py", "ok"),
        cwd=CWD,
    )
    ev = gather(s)
    assert [(x.command, x.fix) for x in ev.shields] == [("python app.py", "`pip install -r requirements.txt`")]
    assert ev.edited == []


def test_a_call_cancelled_because_a_call_beside_it_failed_did_not_fail():
    """Claude Code cancels the calls made beside one that failed ("Sibling tool call errored"): the
    cancelled command never ran, so `rtk bun run lint` was a shield "failed: `Sibling tool call
    errored`; fixed by `bun run lint`"."""
    sibling = "<tool_use_error>Sibling tool call errored</tool_use_error>"
    s = make_session(
        ("user", "Check the change."),
        _bash("bun run test", "error: 2 tests failed", True),
        _bash("rtk bun run lint", sibling, True),
        _bash("bun run lint", "Checked 120 files. No fixes applied."),
        cwd=CWD,
    )
    assert gather(s).shields == []


def test_a_check_that_caught_the_sessions_own_mistake_is_no_shield_and_a_wrapper_is_the_fix_it_was():
    """`bun run lint` failing on a variable the session had just written, then that file edited, is
    the check doing its job: no lesson. `rtk bun run test` failing ("unrecognized subcommand") and
    `bun run test` working later is overcome by dropping the wrapper, whatever was edited between
    (it was "fixed by editing `a.test.ts`"). A script the session wrote that hung on `input()` and
    was edited to sleep instead stays a shield: not a check, and the next run meets it again; so
    does a test run that met a circular import."""
    edit = _edit("src/tab.tsx")
    test_edit = _edit("src/a.test.ts")
    script = _edit("play.py", "input()", "time.sleep(3)")
    s = make_session(
        ("user", "Add the tab."),
        edit,
        _bash("bun run lint", "× This variable skillsCount is unused.", True),
        edit,
        _bash("bun run lint", "Checked 12 files."),
        _bash("rtk bun run test", "error: unrecognized subcommand 'bun'", True),
        test_edit,
        _bash("bun run test", "12 pass"),
        script,
        _bash("python play.py", "EOFError: EOF when reading a line", True),
        script,
        _bash("python play.py", "played"),
        cwd=CWD,
    )
    assert [(x.command, x.fix) for x in gather(s).shields] == [
        ("rtk bun run test", "`bun run test`"),
        ("python play.py", "editing `play.py` (`input()` → `time.sleep(3)`)"),
    ]
    # the tests meeting a circular import the session's refactor made is how the project's modules
    # may import each other: a lesson, though the file fixed is one the session had edited
    config = _edit("app/config.py", "x", "y")
    circular = (
        "ImportError: cannot import name 'Settings' from partially initialized module 'app.config' (circular import)"
    )
    s = make_session(
        ("user", "Move the settings."),
        config,
        _bash("uv run pytest -q", circular, True),
        config,
        _bash("uv run pytest -q", "12 passed"),
        cwd=CWD,
    )
    assert [(x.command, x.fix) for x in gather(s).shields] == [
        ("uv run pytest -q", "editing `app/config.py` (`x` → `y`)")
    ]


def test_another_action_of_the_tool_fixes_a_failure_only_with_the_same_options():
    """`erk exec impl-signal started --session-id "$UNSET"` failing and a bare `… impl-signal ended`
    working later is no fix of it (it was "fixed by `erk exec impl-signal ended`"); `… ended`
    given `--session-id` with the literal id shows how to pass it."""
    failed = 'erk exec impl-signal started --session-id "${CLAUDE_SESSION_ID}"'
    error = "session-id-required: Session ID required for impl-signal started."
    bare = make_session(
        ("user", "Implement the plan."),
        _bash(failed, error, True),
        _bash("erk exec impl-signal ended", '{"success": true}'),
        cwd=CWD,
    )
    assert gather(bare).shields == []
    given = make_session(
        ("user", "Implement the plan."),
        _bash(failed, error, True),
        _bash('erk exec impl-signal ended --session-id="80037c2b"', '{"success": true}'),
        cwd=CWD,
    )
    assert [x.fix for x in gather(given).shields] == ['`erk exec impl-signal ended --session-id="80037c2b"`']


def test_a_chain_is_no_wrapper_a_test_brought_in_line_is_no_lesson_and_one_fix_is_said_once():
    """`bun run test && bun run lint` failing on a test was "fixed by `bun run lint | grep …`" (read
    as the chain's last command unwrapped); a test file edited until it passed is the test brought
    in line with the change; one command failing two ways, both overcome by `bun run lint:fix`, is
    one shield."""
    test_edit = _edit("src/a.test.ts")
    s = make_session(
        ("user", "Finish the tab."),
        _bash("bun run test && bun run lint", '313 | test("returns 500", async () => {\nerror: 1 test failed', True),
        _bash('bun run lint | grep "RemediateTab"', "ok"),
        _bash("bun run test", "Expected: true\nReceived: false\n1 fail", True),
        test_edit,
        _bash("bun run test", "14 pass"),
        _bash("bun run lint", "× Formatter would have printed the following content:", True),
        _bash("bun run lint:fix", "Fixed 2 files."),
        _bash("bun run lint", "Checked 9 files."),
        _bash("bun run lint", "× The imports and exports are not sorted.", True),
        _bash("bun run lint:fix", "Fixed 1 file."),
        _bash("bun run lint", "Checked 9 files."),
        cwd=CWD,
    )
    assert [(x.command, x.fix) for x in gather(s).shields] == [("bun run lint", "`bun run lint:fix`")]


def test_a_look_at_processes_that_found_none_is_no_shield():
    """`ps -o pid,cmd -p 2176644,2177968` exits 1 when the processes are gone, printing its header:
    an unseen Codex session kept it as a shield "fixed by `ps -ef | rg …`" (a look, not a lesson)."""
    s = make_session(
        ("user", "Are the workers still running?"),
        _bash("ps -o pid,ppid,etime,cmd -p 2176644,2177968", "PID PPID ELAPSED CMD", True),
        _bash("ps -ef | rg 'bun test'", "u 2176650 1 bun test"),
        _bash("pgrep -fl 'bun test' -x", "usage: pgrep [-flnvx] pattern", True),
        _bash("pgrep -fl 'bun test'", "2176650 bun test"),
        cwd=CWD,
    )
    assert gather(s).shields == []


def test_a_look_at_the_help_or_elsewhere_after_a_failure_is_no_fix():
    """Unseen sessions kept "`marvin status --agent-type codex` failed: unknown flag; fixed by
    `marvin --help`" (and `workmux add --help`): a look at the help changes nothing, nor does a
    look at another issue. A look at the same issue starts the workaround (realq: `erk exec
    setup-impl --issue 8124` crashed; the plan's branch came from `gh pr view 8124 --json …`)."""
    s = make_session(
        ("user", "Show the deploy status."),
        _bash("shopctl status --agent-type web", "Error: unknown flag: --agent-type", True),
        _bash("shopctl --help", "Usage: shopctl [command]"),
        _bash("shopctl plan --issue 812", "TypeError: plan() got an unexpected keyword argument 'slug'", True),
        _bash("gh pr view 813 --json headRefName", '{"headRefName": "feat/x"}'),
        cwd=CWD,
    )
    assert gather(s).shields == []
    s = make_session(
        ("user", "Set up the plan."),
        _bash("shopctl plan --issue 812", "TypeError: plan() got an unexpected keyword argument 'slug'", True),
        _bash("gh pr view 812 --json headRefName", '{"headRefName": "feat/x"}'),
        cwd=CWD,
    )
    assert [x.fix for x in gather(s).shields] == ["`gh pr view 812 --json headRefName`"]
    s = make_session(  # what did the work still fixes it
        ("user", "Show the deploy status."),
        _bash("shopctl status --agent-type web", "Error: unknown flag: --agent-type", True),
        _bash("shopctl --help", "Usage: shopctl [command]"),
        _bash("shopctl status --agent web", "all green"),
        cwd=CWD,
    )
    assert [(x.command, x.fix) for x in gather(s).shields] == [
        ("shopctl status --agent-type web", "`shopctl status --agent web`")
    ]


def test_the_help_of_the_same_command_is_no_fix_and_a_question_answered_no_is_no_failure():
    """An unseen Codex session: `bun agentv eval X --filter y` failed, then `bun agentv eval run
    --help`, then `bun agentv eval run X --test-id y` worked — the last is the fix; and `npm view
    @x/core@4.41.0 version` answering E404 (not published) was a shield "fixed by" another look. The
    error is what the parser marked, not its count ("error: found 1 error")."""
    unknown = "error: found 1 error\n\n  shop eval run evals/a.yaml --filter strict\n        ^ Unknown arguments\n"
    s = make_session(
        ("user", "Dry-run the composite eval."),
        _bash("bun shop eval evals/a.yaml --filter strict --dry-run", unknown, True),
        _bash("bun shop eval run --help", "Usage: shop eval run <file> [--test-id id]"),
        _bash("bun shop eval run evals/a.yaml --test-id strict --dry-run", "1 case (dry run)"),
        _bash("npm view @shop/core@4.41.0 version --json", "npm error code E404", True),
        _bash("npm view @shop/core dist-tags --json", '{"latest": "4.40.1"}'),
        _bash("shopctl status --short", "Error: unknown flag: --short", True),
        _bash("shopctl status", "ok"),
        cwd=CWD,
    )
    assert [(x.command, x.fix) for x in gather(s).shields] == [
        (
            "bun shop eval evals/a.yaml --filter strict --dry-run",
            "`bun shop eval run evals/a.yaml --test-id strict --dry-run`",
        ),
        ("shopctl status --short", "`shopctl status`"),  # a question the tool could not parse is a lesson
    ]
    assert gather(s).shields[0].error == "Unknown arguments"


def test_a_script_of_several_commands_is_no_shield_but_a_pair_is():
    """An unseen Windows set: "`git add a.go b.go && git status --short && git commit --amend --no-edit
    && git log --oneline -3 && rm ../x.exe` failed: warning: could not open directory 'src/src/…';
    fixed by `… && rm x.exe`": that moment's script, run from the wrong folder. A pair (`npm run build &&
    npm test`) is still a lesson."""
    chain = "git add a.go && git status --short && git commit --amend --no-edit && rm ../x.exe"
    s = make_session(
        ("user", "Amend it."),
        _bash(chain, "warning: could not open directory 'src/src/': No such file or directory", True),
        _bash(chain.replace("../x.exe", "x.exe"), "[main 1a2b3c] fix"),
        cwd=CWD,
    )
    assert gather(s).shields == []
    pair = make_session(  # … where two commands are still one lesson
        ("user", "Build it."),
        _bash("npm run build && npm test", "Error: Cannot find module 'vite'", True),
        _bash("npm install", "added 312 packages"),
        _bash("npm run build && npm test", "built in 2.1s\n12 passing"),
        cwd=CWD,
    )
    assert [(x.command, x.fix) for x in gather(pair).shields] == [("npm run build && npm test", "`npm install`")]
    quoted = make_session(  # `;` inside a quoted argument chains nothing
        ("user", "Build it with a banner."),
        _bash('node build.js --banner "v1; built; ok"', "Error: Cannot find module 'esbuild'", True),
        _bash("npm install", "added 12 packages"),
        _bash('node build.js --banner "v1; built; ok"', "built dist/app.js"),
        cwd=CWD,
    )
    assert [x.fix for x in gather(quoted).shields] == ["`npm install`"]


def test_a_shell_wrapper_is_judged_by_the_command_it_runs():
    """`powershell.exe -Command "…"`, `bash -c '…'`, `cmd /c …` run the command inside them: two
    wrapped commands that share only the wrapper and its `cd` are two commands (a `git add` is no
    fix for a script that failed), while a wrapped check is still a check."""
    repo = r"C:\Users\dev\shop"
    s = make_session(
        ("user", "Sync the logs."),
        _bash(
            f"powershell.exe -Command \"cd '{repo}'; python 'scripts\\sync.py' | Select-Object -First 5\"",
            "+ CategoryInfo : NotSpecified: (2026-01-16 synced 1 log:String) [], RemoteException",
            error=True,
        ),
        _bash(f"powershell.exe -Command \"cd '{repo}'; git add 'logs\\*.jsonl'\"", ""),
        _bash("bash -c 'npm test'", "Tests: 3 passed"),
        cwd=repo,
    )
    ev = gather(s)
    assert ev.shields == []
    assert any("npm test" in c.line for c in ev.commands if c.check), ev.commands


def test_a_command_run_over_ssh_is_judged_by_the_remote_command_and_is_no_way_to_run_the_project():
    """`ssh root@router "ls -la /etc/init.d/x"` that found no such file was a shield "fixed by"
    the next look (`ssh … "ls … | grep …"`): a look on another machine is exploration there too.
    A check run on another machine is not how this project is checked."""
    s = make_session(
        ("user", "Remove the cloud service from the router."),
        _bash('ssh root@10.0.0.1 "ls -la /etc/init.d/gl-cloud"', "ls: /etc/init.d/gl-cloud: No such file", error=True),
        _bash("ssh root@10.0.0.1 \"ls -la /etc/init.d/ | grep -E 'cloud|modem'\"", "gl-modem"),
        _bash("ssh root@10.0.0.1 'make test'", "ok"),
        _bash("make test", "ok"),
        cwd=CWD,
    )
    ev = gather(s)
    assert ev.shields == []
    assert [c.line for c in ev.commands] == ["make test"]


def test_a_remote_script_keeps_its_quotes_and_its_words():
    """`ssh root@router "ls -la /opt/ 2>/dev/null || echo 'none'"` lost its closing quote when the
    `|| echo …` was taken off (a look at a folder then was a shield), and a remote script of plain
    words was said as `ssh root@router "…"`, as if it were a commit message."""
    from dsh_memory.phase1.shields import shown

    line = "ssh root@10.0.0.1 \"ls -la /opt/ 2>/dev/null || echo 'none'\""
    assert normalize_command(line, CWD).count('"') == 2
    remove = 'ssh root@10.0.0.1 "opkg remove gl-sdk4-ovpn-client gl-sdk4-modem gl-sdk4-tethering"'
    assert shown(remove) == remove
    assert shown('git commit -m "Add the discount rounding to every cart total path"') == 'git commit -m "…"'
    s = make_session(
        ("user", "What is installed on the router?"),
        _bash(line, "ls: /opt/: No such file or directory", error=True),
        _bash("ssh root@10.0.0.1 \"ls /etc/init.d/ | grep -E '(ddns|dlna)'\"", "ddns"),
        cwd=CWD,
    )
    assert gather(s).shields == []


def test_a_chain_that_ends_in_a_look_fixes_nothing_and_an_info_log_line_is_no_error():
    """An unseen Go set kept "`git fetch origin && git rebase origin/main` failed: … index.lock …
    File exists; fixed by `git fetch origin main && git log origin/main --oneline -8`" (the rebase
    was never done) and "`mise run test:ci` failed: `2026/02/07 16:30:27 INFO cleanup completed …
    failed_branches=0 …`" (an INFO line whose counter is named "failed"), and a Codex set "`bun test x`
    failed: `(pass) … > fails clearly when …`" (a test that passed, named for a failure)."""
    lock = "error: Unable to create '/home/dev/src/shop/.git/index.lock': File exists."
    s = make_session(
        ("user", "Rebase on main."),
        _bash("git fetch origin && git rebase origin/main", lock, True),
        _bash("git fetch origin main && git log origin/main --oneline -8", "abc123 feat: x"),
        cwd=CWD,
    )
    assert gather(s).shields == []
    info = (
        "2026/02/07 16:30:27 INFO cleanup completed deleted_branches=2 failed_branches=0 failed_states=0\nexit status 1"
    )
    s = make_session(
        ("user", "Run CI locally."),
        _bash("mise run test:ci", info, True),
        _bash("mise run fmt && mise run lint", "ok"),
        cwd=CWD,
    )
    assert gather(s).shields == []
    passed = "(pass) grade > fails clearly when the manifest is missing [12.0ms]\nerror: script exited with code 1"
    s = make_session(  # a test that passed, named for a failure, is no error either
        ("user", "Run the grade tests."),
        _bash("bun test test/grade.test.ts", passed, True),
        _bash("bun install", "done"),
        _bash("bun test test/grade.test.ts", "(pass) grade > works"),
        cwd=CWD,
    )
    assert gather(s).shields == []
    s = make_session(  # … while a chain that did the work still fixes it
        ("user", "Rebase on the release branch."),
        _bash("git fetch origin && git rebase origin/release", "fatal: invalid upstream 'origin/release'", True),
        _bash("git fetch origin release && git rebase FETCH_HEAD", "Successfully rebased"),
        cwd=CWD,
    )
    assert [x.fix for x in gather(s).shields] == ["`git fetch origin release && git rebase FETCH_HEAD`"]


def test_a_merge_conflict_a_warning_a_running_test_and_a_formatter_are_no_shield():
    """An unseen Go set kept "`git merge origin/x` failed: `Automatic merge failed; …`; fixed by
    `git merge origin/x --no-edit`" (the conflicts were that day's branches, resolved by hand),
    "`mise run test:ci` failed: `… WARN failed to delete orphaned shadow branch …`; fixed by `mise
    run fmt && mise run lint`" (a test's expected warning as the error; a formatter as the fix of
    failing tests)."""
    merge = "Auto-merging go.mod\nCONFLICT (content): Merge conflict in go.mod\nAutomatic merge failed; fix conflicts"
    s = make_session(
        ("user", "Merge the hooks branch."),
        _bash("git merge origin/feat/hooks", merge, True),
        _bash("git merge --abort"),
        _bash("git merge origin/feat/hooks --no-edit", "Merge made by the 'ort' strategy."),
        cwd=CWD,
    )
    assert gather(s).shields == []
    ci = (
        "[test:ci] $ go test -race ./...\n"
        "2026/02/07 16:30:27 WARN failed to delete orphaned shadow branch id=shop/none reason=test\n"
        "--- FAIL: TestInitLogging (0.09s)\n    logging_test.go:40: expected log file, got none\nFAIL"
    )
    s = make_session(
        ("user", "Run CI locally."),
        _bash("mise run test:ci", ci, True),
        _edit("config/logging.toml"),  # (an edit of the code the tests failed on is the work: `_own`)
        _bash("mise run fmt && mise run lint", "ok"),
        _bash("mise run test:ci", "ok  	shop/cmd/shop	4.2s"),
        cwd=CWD,
    )
    (shield,) = gather(s).shields
    assert shield.error == "logging_test.go:40: expected log file, got none"
    assert shield.fix.startswith("editing `config/logging.toml`")
    lint = "cmd/shop/main.go:12: File is not `gofmt`-ed (gofmt)\nexit status 1"
    s = make_session(  # … while a formatter still fixes a linter's finding
        ("user", "Lint."),
        _bash("golangci-lint run ./...", lint, True),
        _bash("go fmt ./..."),
        _bash("golangci-lint run ./...", "0 issues."),
        cwd=CWD,
    )
    assert [x.fix for x in gather(s).shields] == ["`go fmt ./...`"]


def _errors(output: str) -> list[str]:
    """The shields' errors of a command that failed with `output`, then worked after an edit."""
    s = make_session(
        ("user", "Fix it."),
        _bash("pnpm run check", output, True),
        _edit("src/check.ts"),
        _bash("pnpm run check", "ok"),
        cwd=CWD,
    )
    return [x.error for x in gather(s).shields]


@pytest.mark.parametrize(
    ("output", "error"),
    [
        (  # the source a test runner quotes ("273 | name: 'expected-tool-sequence',") is no error
            "test/grade.test.ts:\n271 |     expect(result).toEqual({\n273 |       name: 'expected-tool-sequence',\n"
            "1 | // When the subprocess fails, this is the error instance being returned.\n"
            "error: expect(received).toEqual(expected)\n(fail) grade > prepared [3.1ms]",
            "error: expect(received).toEqual(expected)",
        ),
        (  # … nor the source line a compiler marks with `^` (ts-node's own "return new TSError(…);")
            "> ts-node scripts/generate-openapi.ts\n\n/repo/node_modules/ts-node/src/index.ts:859\n"
            "    return new TSError(diagnosticText, diagnosticCodes, diagnostics);\n           ^\n"
            "TSError: ⨯ Unable to compile TypeScript:\n"
            "src/shares/share.dto.ts(5,3): error TS2564: Property 'shareId' has no initializer.\n",
            "TSError: ⨯ Unable to compile TypeScript:",
        ),
        (  # … nor the header of a case's captured output (vitest's "stderr | a.test.ts > … > case")
            "stderr | src/__tests__/hooks.test.ts > signature check > rejects invalid signatures\n"
            "Webhook error: ReferenceError: crypto is not defined\n Test Files  1 failed (1)",
            "Webhook error: ReferenceError: crypto is not defined",
        ),
        (  # … nor go test's "=== RUN   TestX/unknown_returns_error" line
            "=== RUN   TestRegistry/Get_unknown_agent_returns_error\n"
            "    registry_test.go:31: no agent type named claude-code\n--- FAIL",
            "registry_test.go:31: no agent type named claude-code",
        ),
        (  # a PowerShell error record: its message over "At line:1 char:51", not "+ CategoryInfo : …"
            "Where-Object : The specified operator requires both the -Property and -Value parameters. Provide values "
            "for both \r\nparameters, and then try the command again.\r\nAt line:1 char:51\r\n"
            "+ ... Configuration | Where-Object IPEnabled -eq  | ForE ...\r\n+              ~~~~~~~~~~~~~~~~~~~~\r\n"
            "    + CategoryInfo          : InvalidArgument: (:) [Where-Object], PSArgumentException\r\n"
            "    + FullyQualifiedErrorId : ValueNotSpecifiedForWhereObject,Microsoft.PowerShell.Commands.WhereObject",
            "Where-Object : The specified operator requires both the -Property and -Value parameters. Provide values "
            "for both parameters, and then try the command again.",
        ),
        (  # … nor a terminal's colours around it (a Rust compiler of one's own), nor cargo's test that passed
            "\x1b[1m\x1b[91merror\x1b[0m \x1b[92m(type checker)\x1b[0m\x1b[1m: Variable not defined: x\x1b[0m",
            "error (type checker): Variable not defined: x",
        ),
        (
            "running 3 tests\ntest shell::tests::rejects_trailing_operator_parse_error ... ok\n"
            "test shell::tests::detects_zsh ... FAILED\n\nfailures:\n",
            "test shell::tests::detects_zsh ... FAILED",
        ),
    ],
)
def test_the_error_is_what_the_output_says_went_wrong(output: str, error: str):
    """Seen on unseen sets: a bun test's quoted source line, ts-node's marked source line, go test's
    "=== RUN" line and a PowerShell record's category line were kept as a shield's error."""
    assert _errors(output) == [error]


def test_a_try_on_a_scratch_file_is_no_way_to_run_the_project_and_no_shield():
    """A compiler's author had the agent run the compiler on test programs it wrote to /tmp: each
    run was a "check that passed", each failure a shield "fixed by" the agent's next edit or by
    saving the output to /tmp. A scratch file's run is the work in progress; writing to /tmp
    changes nothing in the project; an output written to /tmp (`-o /tmp/app`) is no scratch input."""
    s = make_session(
        ("user", "Imports across files crash the compiler."),
        _bash("cargo run -- /tmp/t1/main.obs", "error (pre-transpiling): File does not exist!", True),
        _edit("src/transpiler.rs"),
        _bash("cargo run -- /tmp/t1/main.obs", "ok"),
        _bash("./target/debug/obstruct /tmp/t2/main.obs", "error (type checker): Variable not defined: x", True),
        _bash("./t2 > /tmp/out.txt; xxd /tmp/out.txt", "00000000: 4869"),
        _bash("./target/debug/obstruct /tmp/t2/main.obs", "ok"),
        _bash("go build -o /tmp/app ./cmd/app", ""),
        _bash("cargo test", "test result: ok. 12 passed"),
        cwd=CWD,
    )
    ev = gather(s)
    assert ev.shields == []
    assert sorted(c.line for c in ev.commands) == ["cargo test", "go build -o /tmp/app ./cmd/app"]


def test_a_run_on_a_file_the_session_removed_later_is_scratch():
    """The same compiler's author, on another day: the agent wrote its test programs into the
    project's folder, ran the compiler on them ("checks that passed" and shields), then `rm -f`
    them. A file removed later was a try; a file that stays is the project's own."""
    s = make_session(
        ("user", "Imports across files crash the compiler."),
        _bash("cargo run -- try_import.obs", "error (pre-transpiling): File does not exist!", True),
        _edit("src/transpiler.rs"),
        _bash("cargo run -- try_import.obs", "ok"),
        _bash("cargo run -- examples/hello.obs", "Hello"),
        _bash("cargo run -- examples/hello.obs", "Hello"),
        _bash("cargo test", "test result: ok. 12 passed"),
        _bash(f"rm -f {CWD}/try_import.obs {CWD}/try_debug.c", ""),
        cwd=CWD,
    )
    ev = gather(s)
    assert ev.shields == []
    assert sorted(c.line for c in ev.commands) == ["cargo run -- examples/hello.obs", "cargo test"]


def test_a_look_into_the_repository_that_failed_is_no_shield():
    """An unseen Go set kept "`git -C /x/cli fsck --full --unreachable | grep …` failed: `error: …
    invalid sha1 pointer in cache-tree …`; fixed by `git -C /x/cli fsck --full | grep "broken
    link"`": a look that found the repository's damage, then another look (`-C` hid the `git fsck`)."""
    s = make_session(
        ("user", "Our git status has broken, why?"),
        _bash(
            f"git -C {CWD} fsck --full --unreachable | grep -v dangling",
            "error: 082c2c44: invalid sha1 pointer in cache-tree of .git/worktrees/1/index",
            True,
        ),
        _bash(f'git -C {CWD} fsck --full | grep "broken link"', "broken link from tree 1a2b"),
        _bash(f"git -C {CWD} status --short", "fatal: unable to read tree 1a2b", True),
        _bash(f"git -C {CWD} status", "On branch main"),
        cwd=CWD,
    )
    assert gather(s).shields == []


def test_a_wait_and_a_look_that_failed_where_it_looked_is_no_shield():
    """An unseen training set kept as a shield a wait and a look at a log that failed because the
    log was in a subfolder, "fixed" by the same look there: no lesson. A wait refused in the
    foreground and run in the background stays one (the test above)."""
    s = make_session(
        ("user", "Start the training and tell me how it goes."),
        _bash("sleep 60 && tail -3 train_log.txt", "tail: cannot open 'train_log.txt' for reading: No such file", True),
        _bash(f"cd model && sleep 60 && tail -15 {CWD}/model/train_log.txt", "epoch 3 loss 0.41", False),
        cwd=CWD,
    )
    assert gather(s).shields == []


def test_a_shells_start_up_file_complaining_is_not_the_error_of_the_command():
    """An unseen set's shield said a run failed with "…/etc/profile.d/conda.sh:48: parse error near
    `()`" (the machine's shell set-up, printed by every command), fixed by an unrelated edit."""
    from dsh_memory.phase1.outcome import informative_error

    out = "/opt/conda/etc/profile.d/conda.sh:48: parse error near `()'\nModuleNotFoundError: No module named 'torch'\n"
    assert informative_error(out) == "ModuleNotFoundError: No module named 'torch'"
    out = "bash: /home/dev/.bashrc: line 12: nvm: command not found\nError: Cannot find module 'vite'\n"
    assert informative_error(out) == "Error: Cannot find module 'vite'"
    assert informative_error("/opt/conda/etc/profile.d/conda.sh:48: parse error near `()'\n") == ""
    # … Homebrew's `shellenv.sh` (from `~/.zprofile`) in Codex's sandbox, before git's own error
    out = (
        "/opt/homebrew/Library/Homebrew/cmd/shellenv.sh: line 18: /bin/ps: Operation not permitted\n"
        "fatal: Unable to create '/Users/me/shop/.git/index.lock': Operation not permitted\n"
    )
    assert informative_error(out) == "fatal: Unable to create '/Users/me/shop/.git/index.lock': Operation not permitted"
    assert (
        informative_error("GET /api/profile: 404 Not Found\n") == "GET /api/profile: 404 Not Found"
    )  # (no start-up file)


def test_a_zsh_eval_error_of_the_shells_set_up_is_not_the_error_of_the_command():
    from dsh_memory.phase1.outcome import informative_error

    out = "(eval):1: parse error near `()'\nTraceback (most recent call last):\nValueError: bad shape (3, 4)\n"
    assert informative_error(out) == "ValueError: bad shape (3, 4)"


def test_a_tracebacks_source_line_is_not_its_error():
    from dsh_memory.phase1.outcome import informative_error

    out = (
        'Traceback (most recent call last):\n  File "train.py", line 9, in <module>\n'
        "    raise ValueError('weights and population differ')\nValueError: weights and population differ\n"
    )
    assert informative_error(out) == "ValueError: weights and population differ"


def test_codexs_sandbox_wrapper_of_a_failed_command_is_not_its_error():
    """An unseen Codex set's shield read "failed in sandbox LinuxSeccomp with execution error: sandbox
    denied exec error, exit code: 1, stdout: .FF…" as the error: Codex wraps any failed command so;
    what the command printed is the error."""
    from dsh_memory.phase1.outcome import informative_error

    wrapped = (
        "failed in sandbox LinuxSeccomp with execution error: sandbox denied exec error, exit code: 2, stdout: , "
        "stderr: bash: line 1: dist: command not found\n"
    )
    assert informative_error(wrapped) == "bash: line 1: dist: command not found"
    wrapped = (
        "failed in sandbox LinuxSeccomp with execution error: sandbox denied exec error, exit code: 1, stdout: "
        "..F.   [100%]\nE   KeyError: 'hourly'\n1 failed, 3 passed\n, stderr: "
    )
    assert informative_error(wrapped) == "KeyError: 'hourly'"


def test_a_test_suite_failing_on_the_code_the_session_then_edits_is_its_work_and_a_config_edit_a_lesson():
    """An unseen Codex set kept four "`pytest -q` failed: `AssertionError …`; fixed by editing
    `src/x.py`" shields (the tests failing on the code being written, the agent saying nothing of
    why); a fix in how the project is set up (`vitest.config.ts`, `conftest.py`) stays one, and so
    do a failure the agent explained and a script's run fixed by an edit."""

    def session(cmd: str, edited: str, out: str = "E   AssertionError: assert 'M240' in ''\n1 failed"):
        return make_session(
            ("user", "Make it pass."), _bash(cmd, out, True), _edit(edited), _bash(cmd, "4 passed"), cwd=CWD
        )

    assert gather(session("pytest -q", "src/gcode.py")).shields == []
    assert gather(session("npm test", "src/handlers/posts.ts")).shields == []
    assert [x.fix for x in gather(session("pytest -q", "conftest.py")).shields] == ["editing `conftest.py` (`a` → `b`)"]
    assert [x.fix for x in gather(session("npm test", "vitest.config.ts")).shields] == [
        "editing `vitest.config.ts` (`a` → `b`)"
    ]
    explained = make_session(  # … unless the agent says why it failed: how the code's world works
        ("user", "Make it pass."),
        _bash("pytest -q", "E   KeyError: 'hourly'\n1 failed", True),
        ("assistant", "The API omits `hourly` when the location has no hourly model, so `forecast.py` fails."),
        _edit("src/forecast.py"),
        _bash("pytest -q", "4 passed"),
        cwd=CWD,
    )
    assert [x.cause for x in gather(explained).shields] == [
        "The API omits `hourly` when the location has no hourly model, so `forecast.py` fails."
    ]
    changed = make_session(  # … not the run narrated: "But now the error is different - …" (a NixOS set)
        ("user", "Make the check pass."),
        _bash("nix flake check", "error: function called without required argument 'lib'", True),
        (
            "assistant",
            "But now the error is different - it complains that `lib` is missing, probably from the wrapper module.",
        ),
        _edit("home.nix"),
        _bash("nix flake check", "all checks passed"),
        cwd=CWD,
    )
    assert [x.cause for x in gather(changed).shields] == [""]
    eof = "Traceback (most recent call last):\nEOFError: EOF when reading a line"
    assert [x.error for x in gather(session("python make_music.py", "make_music.py", eof)).shields] == [
        "EOFError: EOF when reading a line"
    ]


def test_a_test_runners_section_banner_is_not_the_error():
    from dsh_memory.phase1.outcome import informative_error

    out = "____ ERROR collecting tests/test_x.py ____\nImportError while importing test module 'tests/test_x.py'.\n"
    assert informative_error(out) == "ImportError while importing test module 'tests/test_x.py'."


def test_advice_to_run_the_failed_command_again_is_no_fix():
    """Seen on a TypeScript monorepo's Codex sessions: `npm install --cache …` failed, the agent
    advised a `chown` (a bare command in a list) and "Then re-run: `npm install`", and the shield
    kept the re-run as the fix. Running again what failed is the step after a fix, not one."""
    s = make_session(
        ("user", "Install the worker deps."),
        _bash("cd worker && npm install --cache .npm-cache", "npm ERR! This is an error with npm itself.", True),
        (
            "assistant",
            "The install failed twice.\n\nFix for npm install (you can run locally)\n"
            '- `sudo chown -R 1000:1000 "/home/dev/.npm"`\n- Then re-run: `npm install`\n',
        ),
        cwd=CWD,
    )
    assert gather(s).shields == []
    s = make_session(
        ("user", "Migrate the db."),
        _bash("make migrate", "alembic.util.exc.CommandError: Can't locate revision identified by 'a1b2'", True),
        ("assistant", "Run `alembic stamp head` once, then `make migrate` works."),
        cwd=CWD,
    )
    assert [x.fix for x in gather(s).shields] == ["Run `alembic stamp head` once, then `make migrate` works."]
    # … nor advice that leads into the command it shows next, which the recap does not have (a Go set:
    # advice to run it in the user's own terminal, then a code block)
    s = make_session(
        ("user", "Install the export list."),
        _bash("sudo cp exports /etc/exports", "sudo: a terminal is required to read the password", True),
        (
            "assistant",
            "Run it yourself in your own terminal with `sudo`:\n\n```\nsudo cp exports /etc/exports\n```",
        ),
        cwd=CWD,
    )
    assert gather(s).shields == []


def test_a_question_behind_a_sourced_environment_or_a_wrapper_with_options_is_a_look():
    """Seen on a ROS robot's Codex sessions: `bash --noprofile --norc -lc 'source … && rosservice
    info /x'` failed ("unknown service") and a `rosparam get` through the same wrapper was kept as
    its fix: both only ask. The wrapper's options hid the script, the `source` lead the question.
    `ip -brief addr` and `ip route` ask too; `ip addr add …` does not."""
    from dsh_memory.phase1.commands import is_probe

    def run(cmd: str, out: str, code: int):
        return codex_run(cmd, out, code, CWD)

    ros = "bash --noprofile --norc -lc 'source /opt/ros/noetic/setup.bash && source ws/devel/setup.bash && {}'"
    s = make_session(
        ("user", "Check the mapping node."),
        run(ros.format("rosservice info /mapper/finish"), "ERROR: unknown service /mapper/finish", 1),
        run(ros.format("rosparam get /mapper/mode"), "explore", 0),
        ("assistant", "The node runs in explore mode."),
        cwd=CWD,
    )
    assert gather(s).shields == []
    assert is_probe("ip -brief addr") and is_probe("ip route")
    assert not is_probe("ip addr add 10.0.0.1/24 dev eth0") and not is_probe("source env.sh && make build")
