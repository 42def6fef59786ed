"""What the evidence writer reads besides the agent's sentences: the code the session wrote (a map
of files and the names they define), commands run through a subagent, what the session wrote down
for later sessions (CLAUDE.md shell blocks, the agent's own memory notes), the user's corrections,
and one "Checks that passed" line per project however many sessions ran checks. Crafted sessions in
the shapes Claude Code and Codex logs have; none is from the benchmark set."""

from __future__ import annotations

from dsh_memory.consolidation.mechanical import Group
from dsh_memory.phase1 import steps
from dsh_memory.phase1.codemap import changes, code_map_lines, symbols_in
from dsh_memory.phase1.evidence import gather
from tests.session_helpers import make_session

CWD = "/home/dev/src/shop"

PY = """import httpx


class CartTotal:
    def apply(self, items):
        return sum(items)


def discount_for(code: str) -> float:
    return 0.1


def _round(x):
    return x
"""
TS = """export interface TabItem { label: string }
export function Tabs(props: TabItem[]) { return null }
export const countClass = (n: number) => (n ? "x" : "y")
const Badge = (props) => null
type Local = string
"""
GO = "func (s *Store) Claim(id string) error {\n\treturn nil\n}\ntype Store struct{}\n"


def _bash(cmd: str, out: str = "", error: bool = False):
    return ("tool", "Bash", {"command": cmd, "description": "run"}, out, error)


def test_symbols_are_read_from_what_an_edit_writes_in_common_languages():
    assert symbols_in(PY) == ["CartTotal", "apply", "discount_for", "_round"]
    assert symbols_in(TS) == ["TabItem", "Tabs", "countClass", "Badge", "Local"]
    assert symbols_in(GO) == ["Claim", "Store"]
    assert symbols_in("just prose, no definitions\n  return x") == []


def test_the_code_map_names_the_files_changed_and_what_they_define_and_leaves_tests_and_other_places_out():
    s = make_session(
        ("user", "Add a discount code to the cart total."),
        ("tool", "Write", {"file_path": f"{CWD}/src/cart/total.py", "content": PY}, "ok", False),
        ("tool", "Edit", {"file_path": f"{CWD}/web/Tabs.tsx", "old_string": "x", "new_string": TS}, "ok", False),
        (
            "tool",
            "Edit",
            {"file_path": f"{CWD}/web/Tabs.tsx", "old_string": "y", "new_string": "// a comment"},
            "",
            False,
        ),
        (
            "tool",
            "Write",
            {"file_path": f"{CWD}/tests/test_total.py", "content": "def test_total():\n  pass\n"},
            "",
            False,
        ),
        ("tool", "Write", {"file_path": "/tmp/scratch.py", "content": "def scratch():\n  pass\n"}, "", False),
        ("tool", "Edit", {"file_path": f"{CWD}/README.md", "old_string": "a", "new_string": "b"}, "ok", False),
        (
            "tool",
            "apply_patch",
            "*** Begin Patch\n*** Update File: server/store.go\n@@\n-old\n"
            + "".join("+" + ln + "\n" for ln in GO.splitlines()),
            "Done",
            False,
        ),
        ("assistant", "Added the discount code."),
        cwd=CWD,
    )
    ev = gather(s)
    paths = [c.path for c in ev.changes]
    assert paths == ["web/Tabs.tsx", "src/cart/total.py", "server/store.go", "README.md"]  # most worked on first
    assert "tests/test_total.py" not in paths and "/tmp/scratch.py" not in paths
    lines = code_map_lines(ev.changes)
    assert "- `src/cart/total.py` defines `CartTotal`, `apply`, `discount_for`, `_round`" in lines
    assert "- `server/store.go` defines `Claim`, `Store`" in lines
    assert lines[-1] == "- Also changed: `README.md`"
    raw = steps.raw_memory(ev, "x")
    assert steps.CODE_MAP in raw and "scratch" not in raw and "test_total" not in raw


def test_the_code_map_caps_files_and_names():
    edits = [(f"{CWD}/m{i}.py", "".join(f"def f{i}_{j}():\n  pass\n" for j in range(9))) for i in range(10)]
    changed = changes(edits, CWD)
    assert len(changed) == 6
    assert code_map_lines(changed)[0].endswith("`f0_4` (+4 more)")


def test_a_command_a_subagent_ran_is_kept_with_the_subagent_that_ran_it():
    prompt = "Run the billing tests and report results:\n\ncd /home/dev/src/shop/billing && uv run pytest tests/ -v\n"
    s = make_session(
        ("user", "Fix the invoice rounding."),
        (
            "tool",
            "Task",
            {"subagent_type": "runner", "description": "tests", "prompt": prompt},
            "pytest passed: 14",
            False,
        ),
        ("assistant", "Fixed."),
        cwd=CWD,
    )
    ev = gather(s)
    assert [(c.line, c.via, c.check) for c in ev.commands] == [
        ("cd billing && uv run pytest tests/ -v", "runner", True)
    ]
    assert "- Checks that passed: `uv run pytest tests/ -v` (in `billing`) (through the `runner` subagent)" in (
        steps.raw_memory(ev, "x")
    )


def test_a_search_prompt_naming_attributes_runs_nothing():
    # An Explore prompt listed `node.plan` and `node.pr` (fields to find): they were kept as commands
    # the subagent ran ("Set up and run with: `node.plan` …"), `node` being a program name.
    prompt = "Search for the old fields:\n1. `node.plan` or `step.plan`\n2. `node.pr`\nThen run `python3.11 -m pytest`"
    s = make_session(
        ("user", "Rename the fields."),
        ("tool", "Task", {"subagent_type": "Explore", "description": "find refs", "prompt": prompt}, "found 3", False),
        ("tool", "Task", {"subagent_type": "Explore", "description": "find more", "prompt": prompt}, "found 1", False),
        ("assistant", "Done."),
        cwd=CWD,
    )
    assert [c.line for c in gather(s).commands] == ["python3.11 -m pytest"]


def test_commands_a_prompt_offers_as_alternatives_are_none_the_subagent_ran():
    # Seen on a Windows Go set: "Write and actually RUN … a quick `go run`/`go test` snippet" in a
    # verifier's prompt gave "Set up and run with: `go run`" and "Checks that passed: `go test`"
    # (through the subagent): it ran one of them, or neither, and which one nothing says.
    prompt = (
        "4. Write and actually RUN a minimal Go test or a quick `go run`/`go test` snippet that calls it.\n"
        "5. Check with `npm test` or `yarn test`, then run `go build ./...`"
    )
    s = make_session(
        ("user", "Verify the fix."),
        ("tool", "Task", {"subagent_type": "general-purpose", "description": "verify", "prompt": prompt}, "ok", False),
        ("assistant", "Verified."),
        cwd=CWD,
    )
    assert [c.line for c in gather(s).commands] == ["go build ./..."]


def test_set_up_and_run_commands_go_on_one_line_in_the_order_they_first_ran():
    s = make_session(
        ("user", "Get the generator running."),
        _bash("conda create -n gen311 python=3.11 -y", "done"),
        _bash("pip install -r requirements.txt", "Successfully installed"),
        _bash("python generate.py", "wrote out.wav"),
        _bash("python generate.py", "wrote out.wav"),
        cwd=CWD,
    )
    lines = steps.command_lines(gather(s).commands)
    assert lines == [
        "- Set up and run with: `conda create -n gen311 python=3.11 -y`, then `pip install -r requirements.txt`, "
        "then `python generate.py` (ran 2×)"
    ]


def test_a_run_that_failed_until_the_setup_ran_comes_after_the_setup():
    """The sequence a next session follows is the order the commands first worked: `python
    train.py` failed before `pip install` had run, so it comes after it (it came first)."""
    s = make_session(
        ("user", "Get the trainer running."),
        _bash("python train.py", "ModuleNotFoundError: No module named 'torch'", error=True),
        _bash("pip install -r requirements.txt", "Successfully installed torch"),
        _bash("python train.py", "epoch 1 loss 0.3"),
        cwd=CWD,
    )
    assert steps.command_lines(gather(s).commands) == [
        "- Set up and run with: `pip install -r requirements.txt`, then `python train.py` (ran 2×)"
    ]


def test_what_the_session_wrote_down_for_later_sessions_is_kept():
    claude_md = "# Notes\n\n## Commands\n\n```bash\nmake setup\n# comment\nmake serve PORT=8080\nls -la\n```\n"
    note = (
        "---\nname: Schema changes go through migrations\ndescription: Never edit db/schema.sql by hand; run make migrate.\n"
        "type: feedback\n---\n\nbody\n"
    )
    s = make_session(
        ("user", "Document how to run it."),
        ("tool", "Write", {"file_path": f"{CWD}/CLAUDE.md", "content": claude_md}, "ok", False),
        (
            "tool",
            "Write",
            {"file_path": "/home/dev/.claude/projects/-home-dev-src-shop/memory/feedback_schema.md", "content": note},
            "ok",
            False,
        ),
        cwd=CWD,
    )
    ev = gather(s)
    assert ev.documented == ["make setup", "make serve PORT=8080"]
    # the note's name is its headline, said before its description
    assert ev.agent_notes == [
        "Schema changes go through migrations — Never edit db/schema.sql by hand; run make migrate."
    ]
    raw = steps.raw_memory(ev, "x")
    assert "- The project's agent instructions list: `make setup`; `make serve PORT=8080`" in raw
    assert "- Noted for later sessions: Schema changes go through migrations — Never edit db/schema.sql" in raw
    assert "ls -la" not in raw


def test_the_commands_a_projects_skill_says_to_run_are_kept_with_the_toolchain_first():
    """A TypeScript set's user had Codex write a skill to run the tests and lint
    (`.codex/skills/run-tests-lint/SKILL.md`, its steps in prose: "run `npm test`"), then add `nvm
    use 20` before them. A project's skill is an agent instruction file; the commands its prose
    says to run count, never one it says not to run, nor a look (`nvm ls`); the toolchain chosen
    comes first, wherever an edit wrote it."""
    skill = (
        "---\nname: run-tests-lint\ndescription: Run the tests and lint.\n---\n\n1. From the repo root, run:\n"
        "   - `npm test`\n   - `npm run lint`\n2. Never run `npm publish` from here.\n3. Check versions with `nvm ls`.\n"
    )
    patch = (
        "*** Begin Patch\n*** Update File: .codex/skills/run-tests-lint/SKILL.md\n@@\n"
        "-1. From the repo root, run:\n+1. From the repo root, run `nvm use 20` to select Node.js 20.\n+2. Then run:\n"
        "*** End Patch"
    )
    s = make_session(
        ("user", "can you make a skill to run tests and lint yourself?"),
        ("tool", "Write", {"file_path": f"{CWD}/.codex/skills/run-tests-lint/SKILL.md", "content": skill}, "ok", False),
        ("user", "Update the skill to run nvm use 20 first"),
        ("tool", "apply_patch", {"input": patch}, "Success.", False),
        cwd=CWD,
    )
    assert gather(s).documented == ["nvm use 20", "npm test", "npm run lint"]


def test_what_the_agent_saved_through_a_memory_tool_is_kept():
    """Asked to remember, an agent may save a note through a memory server (Serena's
    `write_memory`) rather than a file: its top-level items are notes for later sessions, without
    the note's headings, bold and sub-items; a write the server refused, then made again, is one
    note; reading a memory saves nothing, and a notes app's note is the user's document."""
    note = (
        "# Workflow preferences\n\n## Pull requests\n\n- **Prefer the `/pr` skill** to open a pull request\n"
        "- Never run `gh pr create` by hand; the skill handles:\n  - the title\n  - the reviewers\n\n"
        "## Other skills\n\nCheck `~/.claude/skills/` for a skill that fits before doing it by hand.\n"
    )
    args = {"memory_file_name": "workflow-preferences.md", "content": note}
    s = make_session(
        ("user", "Is there a file you write to so that you remember this?"),
        ("tool", "mcp__plugin_serena_serena__write_memory", args, '{"result":"Error: No active project."}', True),
        ("tool", "mcp__plugin_serena_serena__write_memory", args, '{"result":"Memory written."}', False),
        (
            "tool",
            "mcp__plugin_serena_serena__read_memory",
            {"memory_file_name": "a.md", "content": "- old"},
            "ok",
            False,
        ),
        ("tool", "mcp__apple-notes__create_note", {"title": "Groceries", "content": "- milk"}, "ok", False),
        cwd=CWD,
    )
    ev = gather(s)
    assert ev.agent_notes == [
        "Prefer the `/pr` skill to open a pull request",
        "Never run `gh pr create` by hand; the skill handles",
        "Check `~/.claude/skills/` for a skill that fits before doing it by hand.",
    ]
    assert "- Noted for later sessions: Prefer the `/pr` skill to open a pull request" in steps.raw_memory(ev, "x")


def test_a_documented_commands_trailing_comment_is_kept_without_its_padding():
    """A shell block lines its comments up in a column: the comment says why (kept), the padding
    is no part of the command; a documented command the session also ran is said once."""
    agents_md = (
        "```bash\nbun install                                    # worktrees do NOT share node_modules\n"
        "bun run release          # patch bump (default)\nmake lint   # lint\necho '#tag'\n```\n"
    )
    s = make_session(
        ("user", "Document the release."),
        ("tool", "Write", {"file_path": f"{CWD}/AGENTS.md", "content": agents_md}, "ok", False),
        _bash("make lint", "ok"),
        cwd=CWD,
    )
    ev = gather(s)
    assert ev.documented == [
        "bun install # worktrees do NOT share node_modules",
        "bun run release # patch bump (default)",
    ]
    # … and the commands, with what each is for, are a list to pick from, not steps in order (an unseen
    # Maven set's "… say to run: `mvn clean package # Build and package`, then `mvn verify # Run …`")
    assert (
        "- The project's agent instructions list: `bun install` — worktrees do NOT share node_modules; "
        "`bun run release` — patch bump (default)"
    ) in steps.raw_memory(ev, "x")


def test_a_rule_said_again_in_other_words_of_its_own_is_one_rule():
    """An unseen PHP set injected "Commit all, and do not add your signature to the commit message"
    and, two prompts later, "commit all and do not add your signature". A rule said again (its
    words within the other's) is one rule, the fuller wording kept; words that turn it round
    ("do not" against "always") or that only share a few words make two."""
    s = make_session(
        ("user", "do not add your signature"),
        ("assistant", "Committed."),
        ("user", "Commit all, and do not add your signature to the commit message"),
        ("assistant", "Committed."),
        ("user", "commit all and do not add your signature"),
        ("user", "never run the e2e suite before pushing"),
        ("user", "always run the e2e suite before pushing to main"),
        cwd=CWD,
    )
    assert [r.text for r in gather(s).rules] == [
        "Commit all, and do not add your signature to the commit message",
        "never run the e2e suite before pushing",
        "always run the e2e suite before pushing to main",
    ]


def test_a_users_correction_is_a_rule_and_a_bare_complaint_is_not():
    s = make_session(
        ("user", "Commit it."),
        ("assistant", "Committed."),
        ("user", "What I said was run `git add ... && git commit ...` so I only approve once."),
        ("assistant", "Understood."),
        ("user", "That's not what I asked you to do."),
        ("user", "Also: `jq` might not be available on every machine."),
        ("user", "we need a spec first. my workflow is one agent drafts the design and another reviews it"),
        cwd=CWD,
    )
    rules = [r.text for r in gather(s).rules]
    assert "What I said was run `git add ... && git commit ...` so I only approve once." in rules
    assert "`jq` might not be available on every machine." in rules
    assert "my workflow is one agent drafts the design and another reviews it" in rules
    assert not any("not what I asked" in r for r in rules)


def test_another_subcommand_of_the_same_tool_is_no_fix_for_a_failure():
    s = make_session(
        ("user", "Set up the plan."),
        _bash("tool exec setup --issue 12", "TypeError: setup() got an unexpected keyword argument 'slug'", True),
        _bash("tool exec signal started", "ok"),
        cwd=CWD,
    )
    assert gather(s).shields == []


def test_checks_of_several_sessions_make_one_line_per_project():
    g = Group("/home/dev/src/shop")
    g.add("Reusable knowledge", "- Checks that passed: `bun run test`, `bun run lint`", "one")
    g.add("Reusable knowledge", "- Checks that passed: `bun run lint`, `bun run css:build` (in `web`)", "two")
    assert g.sections["Reusable knowledge"] == [
        "- Checks that passed: `bun run lint`, `bun run css:build` (in `web`), `bun run test` [source: one, two]"
    ]
    g.add(
        "Reusable knowledge",
        "- Checks that passed: `bun run test` (runs `bun test src/`), `bun run lint` (in `web`)",
        "3",
    )
    assert g.sections["Reusable knowledge"] == [  # one command once per folder, said the longer way
        "- Checks that passed: `bun run test` (runs `bun test src/`), `bun run lint` (in `web`), `bun run lint`, "
        "`bun run css:build` (in `web`) [source: one, two, 3]"
    ]
    # the same check run other ways in other sessions is one item, said the shortest way (the
    # line of a project with many sessions listed every variant: `uv run pytest tests/unit/ -x -q`, …)
    g = Group("/home/dev/src/api")
    g.add("Reusable knowledge", "- Checks that passed: `uv run pytest tests/unit/ -x -q --tb=short`, `make lint`", "a")
    g.add("Reusable knowledge", "- Checks that passed: `uv run pytest tests/`, `uv run ty check src/`", "b")
    g.add("Reusable knowledge", "- Checks that passed: `uv run ty check`, `make lint` (in `web`)", "c")
    assert g.sections["Reusable knowledge"] == [
        "- Checks that passed: `uv run ty check`, `make lint` (in `web`), `uv run pytest tests/`, `make lint` "
        "[source: a, b, c]"
    ]


def test_the_recap_keeps_what_the_turns_concluded_and_not_their_narration():
    s = make_session(
        ("user", "Why does the cart total drift?"),
        ("assistant", "Let me look at `src/cart/total.py` first."),
        _bash("make test", "12 passed"),
        (
            "assistant",
            "The drift came from `round_cents` in `api/serialize.py` and `src/cart/total.py`. "
            "I removed the second call. Now the tests pass.",
        ),
        cwd=CWD,
    )
    ev = gather(s)
    assert ev.conclusions == ["The drift came from `round_cents` in `api/serialize.py` and `src/cart/total.py`."]
    recap = steps.rollout_summary(ev, "x")
    assert "## Conclusions\n- The drift came from `round_cents`" in recap
    assert "Let me look" not in recap and "I removed" not in recap


def test_a_failure_the_agent_explains_and_advises_on_is_a_shield_with_its_advice():
    s = make_session(
        ("user", "Why does `make migrate` fail?"),
        _bash("make migrate", 'alembic: relation "orders" already exists', True),
        (
            "assistant",
            "The local DB was created by `make seed` without alembic stamps. "
            "Run `alembic stamp head` once, then `make migrate` works.",
        ),
        cwd=CWD,
        source="claude",
    )
    ev = gather(s)
    assert [(x.command, x.advised) for x in ev.shields] == [("make migrate", True)]
    assert steps.raw_memory(ev, "x").splitlines()[1] == (
        '- `make migrate` failed: `alembic: relation "orders" already exists` (The local DB was created by '
        "`make seed` without alembic stamps); the agent's fix: Run `alembic stamp head` once, then `make migrate` works."
    )
    assert (  # in the recap too: nothing in the session ran the fix, so not "fixed by"
        '- `make migrate` failed (`alembic: relation "orders" already exists`); the agent\'s fix: Run `alembic stamp '
        "head` once, then `make migrate` works"
    ) in steps.rollout_summary(ev, "x").splitlines()


def test_a_failure_with_no_advice_and_no_later_success_is_still_no_shield():
    s = make_session(
        ("user", "Run the e2e suite."),
        _bash("make e2e", "Error: browser not found", True),
        ("assistant", "The e2e suite needs a browser that is not installed here."),
        cwd=CWD,
    )
    assert gather(s).shields == []


def test_a_procedure_the_user_asked_to_remember_is_in_the_recap():
    s = make_session(
        ("user", "Cut release 2.1.0 and remember the procedure for next time."),
        ("tool", "Edit", {"file_path": f"{CWD}/pyproject.toml", "old_string": "2.0", "new_string": "2.1"}, "", False),
        _bash("make dist", "built"),
        _bash("twine check dist/*", "PASSED"),
        _bash("git tag v2.1.0 && git push --tags", "ok"),
        cwd=CWD,
    )
    recap = steps.rollout_summary(gather(s), "Cut release 2.1.0")
    assert "## Procedure\n1. edit `pyproject.toml`\n2. `make dist`\n3. `twine check dist/*`" in recap


def test_a_word_of_a_pasted_plan_is_not_the_user_asking_for_a_procedure():
    """ "Implement the following plan: …" with a 9 KB plan whose table names a "checklist": the
    steps of that one implementation became a skill. A procedure is asked for in the user's own
    words (a long paste counts by its first line)."""
    plan = "Implement the following plan:\n\n# Prompt plan\n" + "\n".join(
        f"| Compact section {i} | the JSON formatting checklist | 65 lines | 5 lines |" for i in range(40)
    )
    assert len(plan) > 1200
    # … nor a word of the domain (an unseen Odoo set: a recruitment module's checklist; a database's procedures)
    for said in (plan, "I missing the option of the menu to edit items from checklist of recruitment",
                 "the stored procedure for invoices times out, fix it"):  # fmt: skip
        s = make_session(
            ("user", said),
            ("tool", "Edit", {"file_path": f"{CWD}/prompts/a.md", "old_string": "x", "new_string": "y"}, "", False),
            _bash("bun run test", "ok"),
            _bash("bun run lint", "ok"),
            cwd=CWD,
        )
        assert gather(s).procedure == [], said[:80]


def test_an_error_that_opens_a_piped_output_is_a_failure_not_a_success_that_fixes_another():
    s = make_session(
        ("user", "Run the tests."),
        _bash("wrap bun run test", "error: unrecognized subcommand 'bun'\n\nUsage: wrap [OPTIONS] <COMMAND>", True),
        _bash("bun run lint:fix", "Fixed 1 file."),
        _bash("wrap bun run test 2>&1 | tail -30", "error: unrecognized subcommand 'bun'\n\nUsage: wrap [OPTIONS]"),
        cwd=CWD,
    )
    assert gather(s).shields == []


def test_a_file_the_session_created_ranks_above_files_it_only_edited_a_little_more():
    """A new file is a place the next session cannot know of: it counts as two edits more."""

    def edit(path, n):
        return (
            "tool",
            "Edit",
            {"file_path": f"{CWD}/{path}", "old_string": "a", "new_string": f"def f{n}():\n  pass\n"},
            "ok",
            False,
        )

    made = (
        "tool",
        "Write",
        {"file_path": f"{CWD}/shop/parsing.py", "content": PY},
        f"File created successfully at: {CWD}/shop/parsing.py",
        False,
    )
    patch = "*** Begin Patch\n*** Add File: shop/rates.go\n" + "".join("+" + ln + "\n" for ln in GO.splitlines())
    s = make_session(
        ("user", "Split the parsing out."),
        *[edit(f"shop/m{i}.py", k) for i in range(7) for k in range(2)],
        made,
        ("tool", "apply_patch", patch, "Done", False),
        cwd=CWD,
    )
    paths = [c.path for c in gather(s).changes]
    assert paths[:2] == ["shop/parsing.py", "shop/rates.go"] and len(paths) == 6


def test_a_sentence_that_introduces_a_list_of_names_is_one_fact_and_a_proposal_is_none():
    message = (
        "Bumping is cheap.\n\n"
        "The version lives in 3 files to keep in sync:\n"
        "- `package.json`\n- `.claude-plugin/plugin.json` (plugin entry)\n- `gemini-extension.json`\n\n"
        "So the release step would be:\n- `npm version minor`\n- `git push --tags`\n\n"
        "What changed in the tests:\n- ran them all and they pass now\n- cleaned the fixtures up\n\n"
        "Worktree: `/home/dev/wt/shop-tabs` (branch: `dev/tabs`)"
    )
    s = make_session(("user", "Do we need a version bump?"), ("assistant", message), cwd=CWD)
    facts = gather(s).facts
    assert (
        "The version lives in 3 files to keep in sync: `package.json`, `.claude-plugin/plugin.json` (plugin entry), "
        "`gemini-extension.json`" in facts
    )
    assert "Worktree: `/home/dev/wt/shop-tabs` (branch: `dev/tabs`)" in facts
    assert not any("would be" in f or "cleaned the fixtures" in f for f in facts)


def test_the_recaps_conclusions_survive_the_writers_clean_up():
    """The clean-up drops a line the evidence does not hold (ungrounded): the turns' conclusions
    are evidence too, so the recap keeps them after it, not only before."""
    from dsh_memory.phase1.extraction import ExtractionOutput, clean_output

    s = make_session(
        ("user", "Build the TODO app."),
        (
            "assistant",
            "The app is ready:\n- Organized folder structure (`components/`, `types/`, `hooks/`)\n"
            "- `TodoItem`: one todo with its checkbox, text and delete\n"
            "- Custom `useTodos` hook with `useReducer`\n- `localStorage` persistence across sessions",
        ),
        ("user", "Document it."),
        ("assistant", "`CLAUDE.md` now documents the project's structure and commands."),
        cwd=CWD,
    )
    ev = gather(s)
    assert "Custom `useTodos` hook with `useReducer`" in ev.conclusions and not ev.facts
    recap = steps.rollout_summary(ev, "The user asked: build the TODO app.")
    out = clean_output(ExtractionOutput(raw_memory="", rollout_summary=recap, rollout_slug="todo"), ev.source_text())
    for c in ev.conclusions:
        assert f"- {c}" in out.rollout_summary


def test_what_the_session_set_out_to_do_is_in_the_recap_and_not_injected():
    """A run cut short before any summary says what it worked on only in its task list, its plan
    and its subagents' tasks: the recap keeps their items that name something."""
    plan = "# Plan\n\n## Steps\n1. Add `get_list()` to `HttpClient` in real.py and fake.py\n2. Think it over\n"
    s = make_session(
        ("user", "Make the dashboard load faster."),
        ("tool", "update_plan", {"plan": [{"step": "Inspect the chat handler", "status": "in_progress"}]}, "ok", False),
        (
            "tool",
            "TaskCreate",
            {"subject": "Add HTTP path", "description": "Thread http_client through PlanListService"},
            "ok",
            False,
        ),
        ("tool", "ExitPlanMode", {"plan": plan}, "ok", False),
        (
            "tool",
            "Task",
            {
                "description": "Set up the app",
                "prompt": "Initialize it:\n1. Run `npx create-next-app@latest todo-app`\n",
            },
            "done",
            False,
        ),
        cwd=CWD,
    )
    ev = gather(s)
    assert ev.plan == [
        "Inspect the chat handler",
        "Add HTTP path: Thread http_client through PlanListService",
        "Add `get_list()` to `HttpClient` in real.py and fake.py",
        "Subagent: Set up the app",
        "Run `npx create-next-app@latest todo-app`",
    ]
    recap = steps.rollout_summary(ev, "The user asked: make it faster.")
    assert "## Plan\n- Inspect the chat handler\n" in recap and "- Run `npx create-next-app@latest todo-app`" in recap
    assert "Thread http_client" not in steps.raw_memory(ev, "x")  # searchable, not injected


def test_the_code_map_says_which_changed_file_uses_which():
    loader = 'def get_system_prompt():\n    return _load("system_prompt.md")\n'
    view = 'import { TreeView } from "./TreeView";\nexport function Panel() {}\n'
    edits = [
        (f"{CWD}/bot/prompts.py", loader),
        (f"{CWD}/bot/resources/system_prompt.md", "You are the bot."),
        (f"{CWD}/web/Panel.tsx", view),
        (f"{CWD}/web/TreeView.tsx", "export function TreeView() {}\n"),
    ]
    lines = code_map_lines(changes(edits, CWD))
    assert "- `bot/prompts.py` defines `get_system_prompt`; uses `system_prompt.md`" in lines
    assert "- `web/Panel.tsx` defines `Panel`; uses `TreeView.tsx`" in lines
    assert "- `web/TreeView.tsx` defines `TreeView`" in lines  # names nothing the session changed


def test_a_check_narrowed_to_one_test_or_file_goes_when_its_tool_ran_broader():
    """`python -m pytest tests/a.py::test_b` is that moment's focus when `uv run pytest tests/` ran
    too (the checks line of one session listed four such node ids); alone, it is the check there is."""
    s = make_session(
        ("user", "Fix the close command."),
        _bash("python -m pytest tests/cmd/test_close.py::test_close_plan -x --tb=long", "1 passed"),
        _bash("uv run ruff check --fix src/cmd/close.py", "All checks passed!"),
        _bash("uv run pytest tests/", "612 passed"),
        _bash("uv run ruff check src/", "All checks passed!"),
        cwd=CWD,
    )
    assert [c.line for c in gather(s).commands] == ["uv run pytest tests/", "uv run ruff check src/"]
    alone = make_session(("user", "Fix it."), _bash("uv run pytest tests/test_close.py -q", "3 passed"), cwd=CWD)
    assert [c.line for c in gather(alone).commands] == ["uv run pytest tests/test_close.py -q"]


def test_a_session_run_on_windows_names_its_files_and_folders_relative_to_its_folder():
    """A Claude Code session on Windows (cwd `D:\\repo`) names one file `D:\\repo\\src\\a.go`, a folder
    `/d/repo/src` (Git Bash) or `D:/repo/src`: the code map listed `D:\\repo\\src\\a.go` with the
    agent's scratch files in `C:\\Users\\…\\Temp` beside it, and the checks `cd /d/repo/src && …`."""
    win = "D:\\repo"
    s = make_session(
        ("user", "Add the gradient."),
        (
            "tool",
            "Edit",
            {"file_path": f"{win}\\src\\color.go", "old_string": "a", "new_string": "func Blend() {}"},
            "ok",
            False,
        ),
        (
            "tool",
            "Write",
            {"file_path": "C:\\Users\\me\\AppData\\Local\\Temp\\claude\\scratch.md", "content": "x"},
            "ok",
            False,
        ),
        # a subagent's worktree of the project holds the project's own file
        (
            "tool",
            "Edit",
            {"file_path": f"{win}\\.claude\\worktrees\\a1\\src\\color.go", "old_string": "b", "new_string": "c"},
            "ok",
            False,
        ),
        _bash("cd /d/repo/src && go test ./color/...", "ok  repo/color 0.2s"),
        _bash("cd D:/repo/src && go vet ./...", ""),
        cwd=win,
    )
    ev = gather(s)
    assert [(c.path, c.symbols, c.edits) for c in ev.changes] == [("src/color.go", ["Blend"], 2)]
    assert [c.line for c in ev.commands] == ["cd src && go test ./color/...", "cd src && go vet ./..."]


def test_a_projects_checks_are_its_standing_ones_and_come_first_in_the_injected_summary():
    """An unseen Windows maintainer's project merged 30 checks into one line (2,442 characters: every
    `go test ./x/... -run TestY` a session ran), and the injected summary's "Build and test" showed
    three one-off run lines instead: a narrow check goes when its tool ran broader in any session
    (through a package script too: `bunx biome check a.ts` beside `bun run lint` (runs `biome check
    .`)), the line keeps the MAX_LIST_ITEMS plainest, and the summary shows it first."""
    from dsh_memory.consolidation.checks import MAX_LIST_ITEMS
    from dsh_memory.consolidation.mechanical import render_summary

    g = Group("/home/dev/src/shop")
    g.add("Reusable knowledge", "- Checks that passed: `bunx biome check src/a.ts`, `bun test src/a.test.ts`", "1")
    g.add("Reusable knowledge", "- Checks that passed: `bun run lint` (runs `biome check .`), `bun run test`", "2")
    assert g.sections["Reusable knowledge"] == [
        "- Checks that passed: `bun run lint` (runs `biome check .`), `bun run test` [source: 1, 2]"
    ]
    g = Group("/home/dev/src/posh")
    tests = [f"`go test ./segments/... -run Test{n} -v`" for n in range(12)]
    g.add("Reusable knowledge", "- Checks that passed: " + ", ".join(tests), "a")
    chained = [f"`make check{n} && go vet ./...`" for n in range(10)]
    g.add("Reusable knowledge", "- Checks that passed: `go vet ./...`, " + ", ".join(chained), "b")
    g.add("Reusable knowledge", "- Checks that passed: `go test ./...`, `golangci-lint run`", "c")
    line = g.sections["Reusable knowledge"][0]
    assert "-run" not in line and line.count("`") // 2 == MAX_LIST_ITEMS
    assert line.startswith("- Checks that passed: `go test ./...`, `golangci-lint run`, `go vet ./...`, `make check")
    g.add("Reusable knowledge", "- Set up and run with: `go run . print primary`", "d")
    g.add("Reusable knowledge", "- Set up and run with: `go mod tidy`", "e")
    g.add("Reusable knowledge", "- Set up and run with: `npx markdownlint-cli2 docs/a.mdx`", "f")
    summary = render_summary({g.name: g}, [], 4000)
    assert "## Build and test\n- Checks that passed: `go test ./...`" in summary
    # a chain of checks the line has one by one says nothing more (an unseen Rust set kept
    # `cargo build && cargo test` beside both); a chain with a check of its own stays
    g = Group("/home/dev/src/lang")
    g.add("Reusable knowledge", "- Checks that passed: `cargo build`, `cargo build && cargo test`", "a")
    g.add("Reusable knowledge", "- Checks that passed: `cargo test`, `cargo fmt --check && cargo clippy`", "b")
    assert g.sections["Reusable knowledge"] == [
        "- Checks that passed: `cargo test`, `cargo fmt --check && cargo clippy`, `cargo build` [source: a, b]"
    ]
    # a narrow check a session ran is said after the project's broad ones (a Codex set led with `node --check x.mjs`)
    g = Group("/home/dev/src/ext")
    g.add("Reusable knowledge", "- Checks that passed: `npm run build`, `npm test`", "a")
    g.add("Reusable knowledge", "- Checks that passed: `node --check server/proxy.mjs`", "b")
    assert g.sections["Reusable knowledge"] == [
        "- Checks that passed: `npm run build`, `npm test`, `node --check server/proxy.mjs` [source: a, b]"
    ]


def test_probes_and_questions_to_a_tool_are_no_build_commands_and_a_narrow_check_is_said_once():
    """Seen on unseen Codex sessions: `bun -e "…parse(…)…"`, `npm owner ls agentv` and `bun
    src/cli.ts skills get x` were "Set up and run with" lines; `bunx prettier --check a.mdx` was no
    check; `go build ./... && echo BUILD_OK` kept its echo; four node ids of one pytest were kept."""
    from dsh_memory.phase1.evidence import is_build_command, normalize_command

    for probe in (
        "bun -e \"import { parse } from 'yaml'; parse('a: 1')\"",
        "node -e \"JSON.parse(require('fs').readFileSync('a.json'))\"",
        "npm owner ls agentv",
        "bun apps/cli/src/cli.ts skills get agentv-bench",
        "kubectl get pods",
        # an Elixir project's Codex session: `mix run -e 'IO.inspect(…)'` was a "Set up and run with" line
        "mix run -e 'IO.inspect(Shop.Cart.__info__(:functions))'",
        "elixir -e 'IO.puts(System.version())'",
        "ruby -e 'puts RUBY_VERSION'",
        # … and a Python script fed on stdin (a spec-kit Codex set: a "check that passed" that read a file)
        "python3 - <<'PY'; from pathlib import Path; print(Path('specs/spec.md').read_text()); PY",
        # a Rails set's `rails runner "puts …"` and a NixOS set's `nix eval --raw .#…` were how to run it
        'DISABLE_SPRING=1 bundle exec rails runner "puts Account.count"',
        "bin/rails runner 'pp User.first'",
        "nix eval --raw .#nixosConfigurations.box.config.networking.hostName",
        "nix flake show",
        "nix-instantiate --eval -E '1 + 1'",
        # … and a thesis set's import check in a conda environment
        "conda run -n env1 python -c \"import numpy; print('OK')\"",
    ):
        assert not is_build_command(probe), probe
    assert is_build_command("bundle exec rails runner script/backfill.rb") and is_build_command("nix build .#app")
    assert is_build_command("bun run build") and is_build_command("bun apps/cli/src/cli.ts eval run a.yaml")
    assert is_build_command("mix run priv/repo/seeds.exs")
    # a version manager sets the toolchain up; asked what it has, it changes nothing
    assert is_build_command("nvm use 20") and is_build_command("pyenv local 3.12")
    assert not any(is_build_command(c) for c in ("pyenv versions", "asdf current", "mise which node", "nvm ls"))
    assert (
        normalize_command('go test ./... && echo "---" && gofmt -l . && echo OK', None) == "go test ./... && gofmt -l ."
    )
    assert normalize_command("go build ./... && echo BUILD_OK", None) == "go build ./..."
    s = make_session(
        ("user", "Fix the docs page."),
        _bash("bunx prettier --check docs/a.mdx", "All matched files use Prettier code style!"),
        *[_bash(f"python -m pytest tests/test_a.py::test_{n} -x", "1 passed") for n in range(4)],
        ("assistant", "Done."),
        cwd=CWD,
    )
    checks = [c.line for c in gather(s).commands if c.check]
    assert checks == ["bunx prettier --check docs/a.mdx", "python -m pytest tests/test_a.py::test_0 -x"]
    # one tool under its runner and without (`DISABLE_SPRING=1 bundle exec rspec …`, `rspec …`: a Rails set)
    s = make_session(
        ("user", "Fix the search."),
        *[_bash("DISABLE_SPRING=1 bundle exec rspec spec/requests/a_spec.rb -e search", "1 example") for _ in (1, 2)],
        _bash('rspec spec/models/entry_spec.rb -e "with_id"', "1 example, 0 failures"),
        ("assistant", "Done."),
        cwd=CWD,
    )
    assert [c.line for c in gather(s).commands] == [
        "DISABLE_SPRING=1 bundle exec rspec spec/requests/a_spec.rb -e search"
    ]
    # a file's syntax checked (`node --check x.mjs`, a Codex set's "Set up and run with … (ran 4×)") is a check
    s = make_session(
        ("user", "Fix the proxy."),
        *[_bash(c, "") for c in ("node --check server/proxy.mjs", "python -m py_compile a.py")],
        _bash("conda run -n ml pip install scipy -q", ""),  # a package added to the environment, once
        _bash("conda run -n ml python train.py", ""),
        # … a script of that moment, with a look inside, and a manifest edited once (a Go set's "checks")
        _bash("go mod tidy; grep toolchain go.mod; go build ./...", ""),
        _bash("go mod edit -go=1.22 && go vet ./...", ""),
        ("assistant", "Done."),
        cwd=CWD,
    )
    assert [(c.line, c.check) for c in gather(s).commands] == [
        ("node --check server/proxy.mjs", True),
        ("python -m py_compile a.py", True),
        ("conda run -n ml python train.py", False),
    ]


def test_a_long_sessions_recap_stays_within_its_bound_and_keeps_its_plan_and_outcome():
    """A maintainer's long review sessions gave recaps of up to 6,780 characters, most of them the
    facts the handbook had no room for and the turns' conclusions: those fill what the task, the
    steps, the plan and the outcome leave of MAX_RECAP_CHARS, whole lines, in order."""
    said = "\n\n".join(  # 40 facts on 40 subjects, each in words of its own
        f"The `mod{n}` module in `src/pkg{n}/unit{n}.py` only loads `conf{n}` when flag{n}a and flag{n}b hold "
        f"for item{n}x, item{n}y and item{n}z."
        for n in range(40)
    )
    s = make_session(
        ("user", "Why is rendering slow?"),
        (
            "tool",
            "TodoWrite",
            {"todos": [{"content": "Profile `render_all` in `src/render/`", "status": "done"}]},
            "",
            False,
        ),
        ("assistant", said),
        ("assistant", "The slow part is `render_7` in `src/render/part_7.py`: it re-reads `cache_7` on every pass."),
        cwd=CWD,
    )
    ev = gather(s)
    recap = steps.rollout_summary(ev, "The user asked why rendering was slow.")
    assert len(recap) <= steps.MAX_RECAP_CHARS and len(ev.facts) > steps.MAX_FACTS + 10
    assert "## Also found\n- " in recap and "## Plan\n- Profile `render_all`" in recap
    assert recap.endswith("## Outcome\n" + steps._outcome(ev)) and steps._outcome(ev)


def test_linters_and_gofmt_are_checks_a_fixer_is_not_and_a_look_after_a_build_goes():
    """Seen on an unseen Windows Go set: `npx markdownlint-cli2 a.mdx` and `gofmt -l .` (ran 4×)
    were "Set up and run with" lines, `gofmt -w .` and `ruff check --fix` "checks that passed",
    `go build -o bin/x . && ls -la bin/` kept its look, and a subagent's prompt line "gofmt -l
    color/ (empty output)" kept what to expect of it."""
    from dsh_memory.phase1.evidence import normalize_command

    assert normalize_command("go build -o ./bin/omp . && ls -la bin/", None) == "go build -o ./bin/omp ."
    prompt = "Run these:\ngofmt -l color/ (empty output)\ngo vet ./color/... (if available)"
    s = make_session(
        ("user", "Tidy the docs and the Go code."),
        _bash("npx markdownlint-cli2 docs/a.mdx", "Summary: 0 error(s)"),
        *[_bash("gofmt -l .", "") for _ in range(2)],
        _bash("gofmt -w .", ""),
        _bash("uv run ruff check --fix src/a.py", "Found 1 error (1 fixed, 0 remaining)."),
        _bash("go build -ldflags=-s -w -o bin/omp .", ""),
        ("tool", "Task", {"subagent_type": "runner", "description": "checks", "prompt": prompt}, "all passed", False),
        ("assistant", "Done."),
        cwd=CWD,
    )
    commands = gather(s).commands
    assert sorted(c.line for c in commands if c.check) == [
        "go build -ldflags=-s -w -o bin/omp .",  # a linker's -w is no rewrite
        "go vet ./color/...",
        "gofmt -l .",  # (`gofmt -l color/` is narrower: said once, by the broader run)
        "npx markdownlint-cli2 docs/a.mdx",
    ]
    assert not any(c.check for c in commands if "--fix" in c.line or "gofmt -w" in c.line)


def test_a_formatter_that_writes_and_a_fix_script_are_no_checks():
    """Seen on erk's and a Bun project's sessions: `uv run ruff format src/x.py` and `bun run lint:fix`
    (its script echoed `$ biome check --write`) were "checks that passed": a next session would run
    them before finishing and rewrite files. A formatter asked to check (`--check`, `--diff`) is one."""
    s = make_session(
        ("user", "Tidy the code."),
        _bash("uv run ruff format src/a.py", "1 file reformatted"),
        _bash("black src/", "All done!"),
        _bash("cargo fmt", ""),
        _bash("bun run lint:fix", "$ biome check --write\nChecked 12 files. Fixed 2 files."),
        _bash("npm run format", "> prettier --write .\nsrc/a.ts 20ms"),
        _bash("uv run ruff format --check src/", "3 files already formatted"),
        _bash("cargo fmt --check", ""),
        _bash("bun run lint", "$ biome check --error-on-warnings\nChecked 12 files."),
        ("assistant", "Done."),
        cwd=CWD,
    )
    commands = gather(s).commands
    assert sorted(c.line for c in commands if c.check) == [
        "bun run lint",
        "cargo fmt --check",
        "uv run ruff format --check src/",
    ]
    assert {c.line for c in commands if c.fixes} == {"bun run lint:fix", "npm run format"}
    # said with the checks, as what fixes their findings: "… `bun run lint:fix` (runs `biome check --write`) (fixes …)"
    (line,) = [ln for ln in steps.command_lines(commands) if ln.startswith(steps.CHECKS)]
    assert "`bun run lint:fix` (runs `biome check --write`) (fixes what they find)" in line
    assert "`npm run format` (runs `prettier --write .`) (fixes what they find)" in line


def test_a_tools_scratch_in_its_dot_folder_is_no_code_map_entry():
    """A coordinator's Codex sessions listed the prompts they wrote for workers
    (`.workmux/prompts/x.md`) and a brainstorm's pages (`.superpowers/brainstorm/<id>/content/a.html`)
    as files the session changed; Copilot's `.github/prompts/` and other dot-folders stay."""
    edits = [
        (f"{CWD}/.workmux/prompts/review-e2e.md", "Review PR 1510 end to end."),
        (f"{CWD}/.superpowers/brainstorm/90082-1776704014/content/approaches.html", "<h1>A</h1>"),
        (f"{CWD}/.cache/tool/logs/run.log", "x"),
        (f"{CWD}/.github/prompts/review.prompt.md", "Review the diff."),
        (f"{CWD}/.claude/settings.json", "{}"),
        (f"{CWD}/src/app.py", "def main():\n    pass\n"),
    ]
    assert sorted(c.path for c in changes(edits, CWD)) == [
        ".claude/settings.json",
        ".github/prompts/review.prompt.md",
        "src/app.py",
    ]
    # … nor a step of the recap's "What happened" (a brainstorm's pages were 8 "Edited …" lines of 12)
    s = make_session(
        ("user", "Design it."),
        *[("tool", "Write", {"file_path": path, "content": text}, "ok", False) for path, text in edits],
        cwd=CWD,
    )
    recap = steps.rollout_summary(gather(s), "The user asked for a design.")
    assert "- Edited `src/app.py`" in recap and "- Edited `.github/prompts/review.prompt.md`" in recap
    assert ".workmux" not in recap and "brainstorm" not in recap and "run.log" not in recap


def test_a_run_narrowed_to_one_case_is_no_way_to_run_the_project():
    """Seen on an unseen set's injected summary: "Set up and run with: `bun agentv eval run
    examples/x.eval.yaml --test-id strict-or-local --dry-run`", one case of that moment (its usage
    lesson is the shield's). The run of the whole thing stays."""
    s = make_session(
        ("user", "Check the composite example."),
        _bash("bun agentv eval examples/x.eval.yaml --filter strict-or-local", "error: found 1 error", True),
        _bash("bun agentv eval run examples/x.eval.yaml --test-id strict-or-local --dry-run", "1 case ok"),
        _bash("uv run scripts/eval.py --grep 'slow case'", "ok"),
        _bash("go run ./cmd/server", "listening"),
        ("assistant", "Done."),
        cwd=CWD,
    )
    assert [c.line for c in gather(s).commands] == ["go run ./cmd/server"]


def test_one_test_of_maven_gradle_cargo_or_pytest_is_said_by_the_whole_suite():
    """An unseen Maven set listed `mvn test -Dtest=FooIT`, `mvn clean test -Dtest=A,B -q` beside
    `mvn verify`; a Rust set `cargo test test_x -- --nocapture` beside `cargo test`. One test is
    that moment's focus; a package (`-p x`) or the binary's options (`-- --nocapture`) are not."""
    s = make_session(
        ("user", "Fix the mapper tests."),
        _bash("mvn test -Dtest=MapperIT", "BUILD SUCCESS"),
        _bash("mvn clean test -Dtest=MapperTest,VisitorTest -q", "BUILD SUCCESS"),
        _bash("mvn clean verify", "BUILD SUCCESS"),  # (`clean` first: the same check)
        _bash("mvn verify", "BUILD SUCCESS"),
        _bash("gradle test --tests com.x.MapperTest", "BUILD SUCCESSFUL"),
        _bash("gradle test", "BUILD SUCCESSFUL"),
        _bash("cargo test parse_params -- --nocapture", "test result: ok. 1 passed"),
        _bash("cargo test -p core", "test result: ok. 40 passed"),
        _bash("cargo test -- --nocapture", "test result: ok. 52 passed"),
        _bash("uv run pytest -k mapper", "3 passed"),
        _bash("uv run pytest", "90 passed"),
        _bash("composer analyse", "[OK] No errors"),
        ("assistant", "Done."),
        cwd=CWD,
    )
    ev = gather(s)
    assert sorted(c.line for c in ev.commands) == [
        "cargo test -- --nocapture",
        "cargo test -p core",
        "composer analyse",
        "gradle test",
        "mvn verify",
        "uv run pytest",
    ]
    assert all(c.check for c in ev.commands)  # PHPStan's `composer analyse` is a check too


def test_a_projects_own_scripts_are_how_it_is_built_and_checked():
    """An unseen C/C++ simulator set ran its end-to-end suite (`bash run_e2e.sh`), its tests
    (`bash tests/sim/test_estimate.sh`) and its build script; a Codex set its smoke test
    (`./scripts/smoke_test.sh`): none was a build command, so the memory said nothing of how the
    project is tested. A script the session only parsed (`bash -n`), one in /tmp or another
    repository, a release or a deploy, and a script name in a subagent's prompt stay out."""
    s = make_session(
        ("user", "Fix the hang."),
        _bash("bash run_e2e.sh", "22 passed"),
        _bash("JOBS=2 FILTER='^roundtrip$' bash run_e2e.sh", "1 passed"),  # (one case of the suite)
        _bash("bash tests/sim/test_estimate.sh", "PASS"),
        _bash("./scripts/smoke_test.sh", "smoke ok"),
        _bash("bash build_sim.sh", "built"),
        _bash("bash build_sim.sh", "built"),
        _bash("bash -n scripts/run_all.sh", ""),
        _bash("bash /tmp/try.sh", "ok"),
        _bash("./utils/create-release.sh", "released 1.2.0"),
        ("tool", "Task", {"prompt": "Look at scripts/bench/run_single.sh", "subagent_type": "Explore"}, "ok", False),
        ("assistant", "Done."),
        cwd=CWD,
    )
    ev = gather(s)
    assert [(c.line, c.check) for c in ev.commands] == [
        ("bash run_e2e.sh", True),
        ("bash tests/sim/test_estimate.sh", True),
        ("./scripts/smoke_test.sh", True),
        ("bash build_sim.sh", False),  # (a build step: how it is set up)
    ]


def test_latest_is_no_test_but_test_runners_are_checks():
    """`test` matched inside `x@latest`: `npm install left-pad@latest` would be a "check that passed",
    and `npm ci` (an install) too. Test runners, however spelt, and `make ci` stay checks."""
    lines = [
        "npm install left-pad@latest",
        "npm ci",
        "make ci",
        "cargo nextest run",
        "python runtests.py",
        "go test ./...",
        "uv run pytest -q",
        "npx vitest run",
        "python -m unittest discover",
        "npx playwright test",
        "bun run test:unit",
    ]
    checks = {}
    for line in lines:  # one session each: a session keeps at most MAX_COMMANDS
        s = make_session(("user", "Set it up."), _bash(line, "ok"), cwd=CWD)
        checks.update({c.line: c.check for c in gather(s).commands})
    assert [checks.pop(line, False) for line in lines[:2]] == [False, False]
    assert checks == dict.fromkeys(lines[2:], True)


def test_one_check_started_several_ways_is_one_item():
    """An unseen project's line listed `npm run test` (runs `vitest run`), `npm test` (runs `vitest
    run`) and `npx vitest run`, and `npm run build` (runs `astro build`) beside `npx astro build`:
    the same work, started another way. A fixer of the same tool stays apart from its check."""
    g = Group("/home/dev/src/site")
    g.add("Reusable knowledge", "- Checks that passed: `npm run test` (runs `vitest run`), `npx astro build`", "a")
    g.add(
        "Reusable knowledge",
        "- Checks that passed: `npm test` (runs `vitest run`), `npm run build` (runs `astro build`), "
        "`npx vitest run`, `npm run lint` (runs `biome check`), `npm run lint:fix` (runs `biome check --write`) "
        "(fixes what they find)",
        "b",
    )
    assert g.sections["Reusable knowledge"] == [
        "- Checks that passed: `npm test` (runs `vitest run`), `npm run build` (runs `astro build`), `npm run lint` "
        "(runs `biome check`), `npm run lint:fix` (runs `biome check --write`) (fixes what they find) [source: a, b]"
    ]
    g = Group("/home/dev/src/site")  # … and one session's own line, under the same rules
    g.add("Reusable knowledge", "- Checks that passed: `npm run test` (runs `vitest run`), `npx vitest run`", "c")
    assert g.sections["Reusable knowledge"] == ["- Checks that passed: `npm run test` (runs `vitest run`) [source: c]"]
    # what a subagent was told to run is left out where a session ran it itself, in its folder
    g = Group("D:\\posh")
    g.add("Reusable knowledge", "- Checks that passed: `go test ./...` (through the `general-purpose` subagent)", "d")
    g.add("Reusable knowledge", "- Checks that passed: `go test ./...` (in `src`), `gofmt -l .` (in `src`)", "e")
    assert g.sections["Reusable knowledge"] == [
        "- Checks that passed: `go test ./...` (in `src`), `gofmt -l .` (in `src`) [source: d, e]"
    ]


def test_a_plan_or_notes_file_defines_nothing_and_a_plan_modes_plan_is_no_project_file():
    """A session that wrote a plan with code samples (`IMPROVEMENTS.md`, a README's snippet) was
    said to define their names there, as if the code lived in the document; Claude Code's plan
    mode file (`.claude/plans/<name>.md`) was listed as a file of the project."""
    edits = [
        (f"{CWD}/IMPROVEMENTS.md", "## Streaming\n```python\ndef process_jsonl_streaming(path):\n    ...\n```\n"),
        (f"{CWD}/docs/guide.rst", "class Example:\n    pass\n"),
        (f"{CWD}/.claude/plans/effervescent-popping-quokka.md", "fn view() {}\n"),
        (f"{CWD}/src/search.py", "def search_conversations(q):\n    return []\n"),
    ]
    changed = changes(edits, CWD)
    assert [c.path for c in changed] == ["src/search.py", "IMPROVEMENTS.md", "docs/guide.rst"]
    assert code_map_lines(changed) == [
        "- `src/search.py` defines `search_conversations`",
        "- Also changed: `IMPROVEMENTS.md`, `docs/guide.rst`",
    ]


def test_set_up_lines_of_several_sessions_fold_where_one_has_the_others_steps():
    """An unseen set's project had five "Set up and run with" lines: `pnpm --filter web dev`;
    `… web dev`, then `… api dev`; the same two the other way round; `pnpm api:generate` twice,
    once saying what it runs. One session's steps among another's are one line, the longer."""
    g = Group("/home/dev/src/box")
    knows = g.sections.setdefault("Reusable knowledge", [])
    g.add("Reusable knowledge", "- Set up and run with: `pnpm api:generate` (runs `pnpm openapi:gen`) (ran 2×)", "a")
    g.add("Reusable knowledge", "- Set up and run with: `pnpm --filter web dev`", "b")
    g.add("Reusable knowledge", "- Set up and run with: `pnpm --filter web dev`, then `pnpm --filter api dev`", "c")
    g.add(
        "Reusable knowledge",
        "- Set up and run with: `pnpm --filter api dev` (ran 2×), then `pnpm --filter web dev`",
        "d",
    )
    g.add("Reusable knowledge", "- Set up and run with: `pnpm api:generate` (ran 2×)", "e")
    g.add("Reusable knowledge", "- Set up and run with: `pnpm --filter web dev` (in `apps`)", "f")
    assert knows == [
        "- Set up and run with: `pnpm --filter web dev` (in `apps`) [source: f]",
        "- Set up and run with: `pnpm --filter web dev`, then `pnpm --filter api dev` [source: b, c, d]",
        "- Set up and run with: `pnpm api:generate` (runs `pnpm openapi:gen`) (ran 2×) [source: a, e]",
    ]


def test_set_up_lines_of_one_command_run_other_ways_fold_into_the_plainest():
    """An unseen set's project had five "Set up and run with" lines, among them `npm run dev` and
    `npm run dev -- --port 4321`, and `npm run seed` once as the session's and once through a
    subagent: the same command with other flags or run another way is one step, said the plainest
    way."""
    g = Group("/home/dev/src/box")
    knows = g.sections.setdefault("Reusable knowledge", [])
    g.add("Reusable knowledge", "- Set up and run with: `npm run dev -- --port 4321`", "a")
    g.add("Reusable knowledge", "- Set up and run with: `npm run seed`", "b")
    g.add("Reusable knowledge", "- Set up and run with: `npm run dev`", "c")
    g.add("Reusable knowledge", "- Set up and run with: `npm run seed` (through the `general-purpose` subagent)", "d")
    g.add("Reusable knowledge", "- Set up and run with: `npm run dev` (in `web`)", "e")
    assert knows == [
        "- Set up and run with: `npm run dev` (in `web`) [source: e]",
        "- Set up and run with: `npm run seed` [source: b, d]",
        "- Set up and run with: `npm run dev` [source: a, c]",
    ]


def test_a_check_of_some_packages_goes_where_the_same_check_ran_on_all():
    """A Go project's merged line listed `go test ./cmd/entire/cli/strategy/ -count=1`, `go build
    ./cmd/entire/cli/checkpoint` and `go build ./cmd/entire/cli/summarise` beside `go build ./...`:
    a command run on some packages says nothing the run on all (`./...`) does not; another
    command's (`go vet`) stays."""
    s = make_session(
        ("user", "Fix the strategy package."),
        _bash("go test ./cmd/shop/strategy/ -count=1", "ok"),
        _bash("go build ./cmd/shop/checkpoint", ""),
        _bash("go vet ./cmd/shop/strategy/", ""),
        _bash("go build ./...", ""),
        _bash("go test ./...", "ok"),
        cwd=CWD,
    )
    assert sorted(c.line for c in gather(s).commands) == [
        "go build ./...",
        "go test ./...",
        "go vet ./cmd/shop/strategy/",
    ]
    g = Group(CWD)
    g.add("Reusable knowledge", "- Checks that passed: `go build ./cmd/shop/checkpoint`, `go test ./cmd/shop/x/`", "a")
    g.add("Reusable knowledge", "- Checks that passed: `go build ./...`, `gofmt -l cmd/`", "b")
    assert g.sections["Reusable knowledge"] == [
        "- Checks that passed: `go build ./...`, `gofmt -l cmd/`, `go test ./cmd/shop/x/` [source: a, b]"
    ]
