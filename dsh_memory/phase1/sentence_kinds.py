"""Kinds of sentence an agent writes that are not a lasting fact about the project, whatever cue
they carry: progress narration ("Let me…", "Reworked…"), first person, a guess, how the worktree
stood at that moment ("`old/` is fully gone"), one run's output or a tracker's status, a gap the
session was about to close, a plan's step or a review's finding. `facts.fact_score` reads them;
`evidence` reads some of them in the user's and the failures' words too. What is true only of that
day (one run's output, a review's verdict, a bug's symptom) is in `that_day.py`.
"""

from __future__ import annotations

import re

PROGRESS = re.compile(
    r"^(let me|let's|now\b|next\b|first\b|then\b|okay|ok\b|good|great|perfect|done|excellent|alright|all set|"
    r"looking|checking|reading|running|searching|starting|continuing|found|i\b|we\b|"
    r"here's|here is|this is|that's|sure|got it|understood|you're right|summary|changes|added|updated|created|"
    r"changed|removed|fixed|implemented|refactored|moved|renamed|wrote|committed|pushed|ran|all \d+|both|"
    r"wait|hmm+|actually|oh|oops|(?:yes|no)(?=,))\b",
    re.I,
)
FIRST_PERSON = re.compile(
    r"\b(I|me|my|mine|myself|ourselves|we|us|our|let's)\b"
    r"|^(?:My|Me|We|Us)\b"  # "My recommendation is …" ("Our X lives in …" says where things are)
)
ACK = re.compile(
    r"^(you'?re right|good (catch|point|call)|got it|understood|makes sense|fair( point)?|agreed|right|sure|ok(ay)?)"
    r"[\s,.!:;—–-]+",
    re.I,
)
CAUSE = re.compile(
    r"\b(because|since|needs?|requires?|must|only|not|no|can'?t|cannot|doesn'?t|isn'?t|fails?|so|omits?|missing|"
    r"removed|without|when)\b",
    re.I,
)
NARRATION = re.compile(
    r"^([A-Z][a-z]+ed|Also|Still|Just|Note|Heads-up|One heads-up|Prefer|Option|Step|Phase|Part|Lets|Worth|Either|Bonus|"
    r"Recommend)\b"
    r"|^Using `[^`]+`(?: skill)? (?:here )?(?:because|since|for|to)\b"  # the skill the agent picked: "Using `x` because …"
    r"|^(?:Kept|Made|Left|Put|Wrote|Built|Rebuilt|Ran|Took|Gave|Brought|Got|Held|Rewrote|Overrode|Undid|Redid|Split|Cut|Set)\s"
    # an instruction (a plan's or a skill's step), not a fact: "Read the `diff` from the response"
    r"|^(Read|Use|Call|Pass|See|Ensure|Keep|Wait|Send|Return|Replace|Copy|Click|Enter|Type|Select|Skip|Apply|Remember|Expect|"
    r"Verify|Avoid|Consider|Fall back|Stage|Unstage|Amend|Squash|Revert|Retry|Re-\w+|"
    # a plan's steps: "Filter to repos that have …", "Confirm + execute", "Resolve the root from …"
    r"Filter|Confirm|Detect|Resolve|Validate|Reject|Fetch|Parse|Load|Save|Store|Compute|Emit|Print|Drop|"
    r"Wrap|Extract|Inject|Insert|Append|Prepend|Mark|Stop|Start|Ask|Leave|Treat|Warn|Maybe|Define|Configure)\s"
    # … also after a condition: "After `start` or `join`, remember this session is in a collab"
    r"|^(After|Before|When|Once|If|On|While)\b[^,:]{1,80}[,:]\s+(remember|use|read|call|pass|run|ensure|make sure|"
    r"keep|wait|check|set|add|skip|send)\b"  # … or "While build runs: check remaining hunks"
    r"|^(Problem|Title|Issue|Summary|Result|Fix|Cause|Context|Goal|Plan|Status|Root cause|Recommendation|Verification"
    r"|Validation|Before|After|Previously|Old|Now|Reason)s?\s*:"  # "Before: `x` would only extract …": the change
    r"|^(?!The\b)[A-Z][a-z]+ (?:root cause|culprit|cause|diagnosis)\s*:"  # "Clear root cause: `dataset.py` samples …"
    r"|^(?:The )?(?:[Kk]ey|[Mm]ain|[Rr]eal|[Bb]ig) (?:insight|finding|takeaway|realization)s?\s*:"  # "The key insight: …"
    # what the analysis turned up: "Root cause found and fixed: …", "A real bug was found and deliberately not fixed: …"
    r"|^[^:]{0,60}\b(?:(?:found|fixed|identified|confirmed|resolved|addressed)|findings?\b[^:]{0,30})\s*:"
    r"|^[A-Z][\w-]*(?:'s)?(?: [\w-]+)? (?:also )?(?:said|answered|replied|reported)\b"  # "DeepWiki also said …"
    # … and what an output said that day: "The message says sessions exist but aren't linked …"
    r"|^(?:The|This|That) (?:error|message|output|log|response|warning)s? (?:says|said|shows|showed|reports|reported)\b"
    # what the change did to it, or a file list's item: "`x_test.go`: Updated test calls …", "`GUIDE.md` - Uses …"
    r"|^`[^`]+`\s*(?:—|–|-|:)\s+[A-Z][a-z]+(?:ed|s)\b"
    r"|^Given (?:the|a|an|that)\b"  # an acceptance criterion: "Given the manager fails to reconnect"
    r"|^(?:Should|Would|Could|Will|Might|May)\s"  # a guess without its subject: "Should now load after the fix"
    # what the change added: "New `skills/x/SKILL.md` (172 lines) with …", "New permitted command: …"
    r"|^[Nn]ew\s(?!(?:sessions?|users?|projects?|runs?|entries|commits?|versions?|files are|releases?)\b)"
    # … in French, Spanish or German: "Ajout de `f`", "Nouvelle fonction …", "Nuevo endpoint …", "Neue Datei …"
    r"|^(?:Ajout|Ajouté|Nouve(?:au|lle|aux|lles)|Suppression|Supprimé|Modifié|Modification|Añadid[oa]s?|Nuev[oa]s?|"
    r"Eliminad[oa]s?|Neue[nrs]?|Hinzugefügt|Entfernt|Geändert)\b"
    # "The plan should be: …", "The best approach: …", "The cleanup direction should be: …"
    r"|^(?:The|So the) (?:[\w-]+ )?(?:plan|approach|idea|proposal|fix|option|direction|design)"
    r"\s*(?::|should\b|would\b|will\b)"
    # a step of the analysis: "One issue is stale …", "Remaining issue is not auth: …", "The key distinction
    # is whether …", "Two findings are forming: …"
    r"|^(?:One|Another|(?:The )?(?:[Rr]emaining|[Oo]ther|[Ss]econd)) (?:issue|problem|finding|blocker|gap)s? (?:is|are)\b"
    r"|^(?:The )?[Kk]ey(?: [\w-]+)? is\b|^\w+ findings? (?:are|is) (?:forming|emerging)\b"
    # … and an answer's framing: "The answer is nuanced: …", "The important distinction: …"
    r"|^(?:The|Short) (?:[\w-]+ )?(?:answer|distinction|difference|nuance|takeaway|upshot|bottom line)\b[^:]{0,20}:"
    # … and options weighed: "The cleanest fix is to use …", "A robust fix is to mark …", "The generic fix is: …"
    r"|^(?:[^.;]{0,120}?,\s+(?:so\s+)?(?:the|a|an)|The|A|One|So the) (?:most )?(?:best|simplest|simpler|cleanest|cleaner|right|"
    r"correct|robust|proper|minimal|generic|easiest|safest|cheapest|cheap|better|obvious|practical) "
    r"(?:plan|approach|idea|fix|option|solution|way)\s+(?:is to|is:|would be)\b"
    # one run's story: "The failed run then retried finalize and stopped …", "The first read wrote `/tmp/x`"
    r"|^(?:The |This |That )?(?:[\w-]+ )?(?:run|job|build|workflow|pipeline|read|attempt|rerun|case|eval|deployment|deploy)s? (?:then |also |"
    r"first |just |never )?(?:ran|stopped|wrote|raced|retried|read|returned|produced|passed|succeeded|found|failed|"
    r"showed|reported|flagged|caught|finished|completed)\b"
    # how the agent got there: "After reviewing all the relevant code, the merge is handled"
    r"|^(?:After|Having|Upon) (?:reviewing|reading|checking|looking|investigating|examining|exploring|analy[sz]ing|"
    r"searching|digging|tracing|going)\b"
    # a list item under a lead the sentence does not carry: "Codex: uses `--yolo` when …", "Everything else: manual"
    r"|^(?!(?:Important|Warning|Caution|Critical|Gotcha)\b)(?:[A-Z][\w/-]*(?: [\w/-]+)?|\d+(?:[-.]\d+)+)\s*:\s+(?!`)"
)
# What a thing cannot do or needs: the facts that keep a next session from a wrong turn.
LIMIT = re.compile(r"\b(only works|can'?t|cannot|doesn'?t work|does not work|won'?t work|requires?|must not)\b", re.I)
HEDGE = re.compile(
    r"\b(likely|probably|possibly|perhaps|maybe|suspicion|suspect|might|may not|may be|could be|could potentially|"
    r"worth investigating|seems|appears to|(?:could|may) (?:mean|indicate|suggest)|suggests?"
    r"|no,? wait|wait,? (?:no|actually)|actually,? no"  # … or taken back: "… triggers `exit(1)`... no wait, …"
    r"|(?:issue|problem|bug|cause|culprit) must be"  # … a guess at the cause: "The issue must be in …"
    r"|will (?:become|turn into|be (?:changed|moved|replaced|renamed|removed|rewritten)))\b"  # … a plan's step
    # … or a design proposed ("The implementation would have `X` delegate to `Y`"), not what a change would break
    r"|\bwould(?!\s+(?:\w+\s+)?(?:fail|break|crash|error|throw|hang|lose|corrupt|overwrite|leak)\b)\b"
    # … or what the change should do: "Since the model reads tool descriptions …, this will steer it away from …"
    r"|^(?:Since|Because|As|Now that)\b[^.;]{0,200},\s*(?:this|that|it|these) (?:will|should)\b"
    # … or an option weighed: "`createTestImageFile` should just return the fixture's path", "The only cost is …"
    r"|\bshould (?:just|simply|instead|rather)\b"
    # … or what a fix is expected to do: "The WebMock error should also be resolved since …"
    r"|\bshould (?:now |also |then )*(?:be (?:resolved|fixed|gone)|go away|disappear|work now|kick in)\b"
    r"|^(?:the )?(?:only|main|one|big|real) (?:cost|downside|drawback|trade-?off|catch)s? (?:is|are|here)\b"
    r"|^the (?:downside|drawback|trade-?off|catch) (?:is|here)\b",
    re.I,
)
DANGLING = re.compile(  # "These are the same primitives…", "This doesn't solve the gap…"; not "This repo uses…"
    r"^(?:And|But|So|Or|Plus)\b"  # "And line 716 is hardcoded", "So it exists in this working tree"
    # … "However, `x` is always included", "Instead, …": set against the sentence before
    r"|^(?:However|Instead|Otherwise|Meanwhile|Likewise|Similarly|Conversely|Nevertheless|That said)\b"
    r"|^.*\binstead\W*$"  # "The Signal class uses `addHandler` instead." (of what the sentence before said)
    r"|^(These|Those|They|It|Its|Both|Neither|Such|This|That)\b"
    r"(?!\s+(?:repo|repository|project|package|app|service|CLI|tool)\b)"  # "This file is …": which one?
    r"|^(?:Currently|Today|Here|Again),?\s+(?:these|those|they|it|its|this|that)\b"  # "Currently it uses …"
    r"|^(?:On|Upon|At|After|During) [\w-]+(?: [\w-]+)?,\s+(?:these|those|they|it|its|this|that)\b"  # "On load, it infers …"
    r"|^(?:In|For|With|Under|From|At) (?:that|those|these|such)\b"  # "In that system, …"
    r"|^(?:If|When|Once|Until|Unless|While) (?:this|that|these|those|it|they)\b"  # "If this grows, …"
    r"|^(?:Without|Before|After|With) (?:this|that|the) (?:change|fix|commit|patch|edit)\b"  # "Without this change, …"
    # a step of a scenario whose actors are named by a letter or a number: "Session B creates `file2.ts` …"
    r"|^(?:Session|Agent|User|Client|Worker|Tab|Device|Turn|Commit) (?:[A-Z]|\d)\b(?![\w.-])"
    # an answer's clause without its question ("Because `x` only receives the struct."), a requirement
    # without its subject ("Must be written when the status moves to …")
    r"|^Because\b[^,;:—]*$|^(?:Must|Should|Needs? to|Has to|Have to) be\b|^(?:Shouldn'?t|Won'?t|Doesn'?t|Can'?t) [a-z]+\b"
    r"|^(?:The )?(?:first|second|third|last|other) one\b"  # "The second one will need …": of a list said before
)
PATH_LED = re.compile(r"^`[\w./-]+/[\w.-]+\.\w+`\s*(?:—|–|-|:)\s+")
# "Worktree: `/src/wt/cli-collab` (branch: `collab`)": where something is, said as a label and a name.
WHERE_LED = re.compile(
    r"^(?:worktree|repo|repository|config|configuration|entry ?point|binary|source|docs?|"
    r"package|module|manifest|settings|schema)s?\s*:\s*`[^`]*(?:[/\\]|\.\w{1,5}`)",  # … a path, not "Config: `opts.maxConcurrency`"
    re.I,
)
# The state of the worktree or the task at that moment, false in the next session: "`plugins/` is
# fully gone", "no leftover conflict markers", "X now points at Y", "hasn't been merged to main",
# "the tests now pass". (A state that says what it breaks is kept: "`A` is deleted but `B` still
# loads it — B fails".)
_AT_HAND = r"(?:\b(?:is|are)|'s)\s+(?:(?:still|currently|now)\s+)?"  # "… is currently failing"
STATE = re.compile(
    r"\b(?:is|are) (?:now |fully |completely |all )*gone\b|\b(?:is|are) (?:now|fully|completely) "
    r"(?:deleted|removed|in place|done|resolved|fixed|merged|committed|pushed|staged)\b"
    r"|\bno (?:remaining|more)\b|\bleftover\b|\bconflict markers?\b"
    r"|\b(?:has|have)(?:n'?t| not)(?: yet)? been (?:merged|pushed|committed|released|deployed)\b"
    r"|\b(?:working tree|worktree|working directory|branch|checkout)(?: \S+)? is (?:now )?(?:clean|dirty|up to date|ahead|"
    r"behind)\b"
    r"|\b\d+ commits? (?:ahead|behind)\b"
    r"|\bnothing to commit\b|\b(?:has|have|with) (?:\w+ )?(?:uncommitted|unstaged|staged) (?:changes|edits|files)\b"
    r"|\b(?i:désormais|dorénavant|maintenant|ahora|jetzt)\b"  # … "now" in French, Spanish, German: the change said
    # "X now points at Y", "Human docs now state …" (what docs say: what the change wrote there)
    r"|\bnow (?:also |only |just |[a-z]+ly )?(?:pass|use|state|say|mention|describe|document|explain|list|show|"
    r"note|recommend|tell|mirror|direct|point|match|reference|cover|link|include|"
    r"(?!always\b|its\b|this\b|has\b|is\b|was\b|as\b)[a-z]+(?:-[a-z]+)*s)\b"
    # … of a plural subject: "Side pots now pay out per-pot winners", "Both hooks now run first" (where
    # things "now live" is where they are)
    r"|\b(?:[a-z]+s|they|both|all) now (?!that\b|on\b|and\b|or\b|in\b|at\b|by\b|the\b|a\b|live\b)[a-z]+\b"
    r"|\bnow\b[^.;]{1,40}\binstead of\b"  # … or without its verb: "Fallback provider id now `oss` instead of `openai`"
    # … and said in the negative: "`X` no longer needs `repo`", "… no longer bails when …" (not what a tool dropped:
    # "Astro 5 no longer supports `output: hybrid`")
    r"|\bno longer (?!(?:supports|works|accepts|exists|ships|allows|includes|provides)\b)[a-z]+s\b"
    r"|\b(?:is|are)(?:n'?t| not) (?:running|up|started|reachable|appearing|showing up)\b"  # "Docker services aren't running"
    # the work's progress: "Scheduling posts is not implemented yet", "… hasn't been wired up yet"
    r"|(?:\bnot|n't) (?:been )?(?:implemented|wired(?: up| in)?|hooked up|built|finished) yet\b"
    r"|\bnot yet (?:implemented|wired|hooked up|built|finished)\b"
    # what the commit holds, what it left alone, what it leaves be: "Only the script change is staged; the
    # stray `nul` file was left alone", "The `paths` trigger uses `packages/`, so it's unaffected"
    r"|\b(?:is|are|was|were) (?:now )?(?:staged|unstaged)\b|\bleft (?:alone|untouched|as is)\b"
    r"|\bso (?:it'?s|it is|they'?re|they are|this is|that'?s) (?:unaffected|untouched|fine)\b"
    rf"|{_AT_HAND}failing\b"  # "…, but that's failing"
    # a to-do: "README.md - Project Structure section needs major update", "needs both sections merged",
    # "The health check needs to be more resilient", "`x.md` - Has outdated URL", "… has the old configuration"
    r"|\bneeds? (?:\w+ ){0,2}(?:update|updating|clarification|clean-?up|rewrite|rework|merged|merging)\b"
    r"|\bneeds? to be (?:more|less)\b|\bhas outdated\b"
    r"|\b(?:has|have|had|still has|contains?|references?) the old\b"
    # … what was there, or not yet: "The `M-Claude` directory doesn't exist locally", "The config had `x` set as …"
    r"|\b(?:does|do)(?:n'?t| not) (?:yet )?exist (?:locally|yet|here|remotely|upstream|on (?:the )?(?:remote|origin))\b|\b(?:had|was|were)\s+(?:\w+\s+)?set\s+(?:as|to)\b"
    r"|\b(?:review )?comments? #?\d{6,}"  # a review's comments by id: "(comments 2785533331, 2785533380)"
    # the task's own status: "One assertion needed adjustment", "`av-e6l` is done and only needs …", "not closeable",
    # "the deletion is not merged to `main`"
    r"|\bneeded (?:an? |some |one )?(?:adjustments?|updates?|fix(?:es)?|changes?|tweaks?|updating|fixing)\b"
    r"|\b(?:is|are) (?:already |all )?done\b(?! (?:by|in|via|through|with|once|when)\b)|\bnot (?:yet )?(?:closeable|closable)\b"
    r"|\b(?:is|are)(?:n'?t| not)(?: yet)? (?:merged|pushed|committed|released|deployed)\b"
    # … a to-do, a check of that day, a commit of that day: "has junk code that needs to be cleaned up", "The
    # transcript correctly identifies only `b.ts`", "The recent commit `c384b36` changed …"
    r"|\bneeds? to be (?:cleaned up|tidied|fixed|addressed|refactored|rewritten|reworked)\b|(?<!\bbe )\bcorrectly [a-z]+(?:s|ed)\b"
    r"|\bthe (?:recent|latest|previous) commit\b"
    # … a change said as one ("Fallback changed from `'User'` to …", "…, and now the service will strip `0x`")
    r"|\bchanged from\b|\b(?:and|so) now\b"
    r"|\b(?:is|are) (?:now |still )?(?:stale|out of date|outdated)\b"  # "the local `dist` is stale"
    r"|\bcan now\b"  # "Wave 3 can now build on these endpoints"
    # "is returning HTML", "The API is rejecting preflight requests because …"
    r"|\b(?:is|are) (?:still |now |currently )?(?:returning|timing out|hanging|hitting|throwing|showing|getting|loading|"
    r"rejecting|refusing|crashing|erroring|dropping)\b"
    # … and the cause of one error found: "The login error is because the UI uses …", "This failure is due to …",
    r"|^(?:the|this|that) (?:[\w`.'-]+ ){0,3}(?:error|failure|crash|panic|issue|problem|bug|warning|exception)s? "
    r"(?:is|was|are|were) (?:because|due to|caused by|at\b[^.;]{1,80}\bbecause)\b"  # "The panic is at `x.go` because …"
    # … and what one symptom was: "The hang is the DataLoader spawning 132 processes", "The NaN is from `f`",
    # "The error is raised from `to_c` …", "The real issue is that `SOURCES` gets popped …" (not "was that": how
    # a thing works, said once the issue is behind)
    r"|^(?:the|this|that) (?:hang|crash|panic|NaN|leak|slowdown|freeze|deadlock|segfault)s? (?:is|was)\b"
    r"|^(?:the|this|that) (?:error|exception|failure)s? (?:is|was) (?:at|in|from|raised|thrown)\b"
    r"|^(?:the|so the) (?:real |actual |main |core |underlying )?(?:issue|problem|bug) is (?:that|in|at|with)\b"
    # … and what the change did to it: "The six blocks are now wrapped in a guard" (not "is now required")
    r"|\b(?:is|are) now (?!required\b|needed\b)\w+(?:ed|en)\b"
    # what to commit, and a failure that was there before the work: both of that day only
    r"|^(?:so )?only\b[^.;]{0,120}\b(?:should|needs? to|will) be (?:committed|staged|pushed|included)\b"
    r"|\bpre-?existing (?:issue|error|failure|warning|lint|problem|bug|test failure)s?\b"
    r"|\bwill now\b|\b(?:tests?|checks?|builds?|CI|suite) (?:now |all |both )*(?:pass(?:es)?|green|succeeds?)\b"
    r"|^(?:all|both|the) (?:\w+ )?files (?:now )?pass\b(?! through)"  # "All files pass `markdownlint-cli2` …"
    # what is left of a clean-up, "right now": "Only three cases remain", "the only remaining hits are …"
    r"|\b(?:part of|for|in|during) (?:this|the current) (?:task|pr|pull request|session|change|commit)\b"
    r"|\bthe \d+ (?:failures|failing tests|errors|warnings)\b"  # "The 3 failures are in prompt-builder tests"
    r"|^(?:the\s+)?(?:only\s+)?remaining\b|\b(?:no|only)\b[^.;:]{0,80}?\bremains?\b|\bright now\b|\bnow(?:[,;]|\W*$)"
    # a run, a PR, an issue or the branch as it stood: "`bun run typecheck` is still running", "CI is queued
    # here", "the PR is still a draft", "technically mergeable", "local only at this point", "is still open",
    # "behind `origin/main`", "this branch", "unrelated to this commit", "this run did not", "the current `main` checkout"
    r"|\b(?:is|are) (?:still |currently )(?:running|queued|in progress|pending)\b|\b(?:is|are) (?:queued|in progress)\b"
    r"|\b(?:pr|pull request) is (?:still )?(?:a )?(?:draft|open|closed|merged|approved)\b|\bmergeable\b"
    r"|\b(?:remains?|stays?|is still) (?:in[_ ]progress|open|blocked|pending)\b|\bat this point\b|\bso far\b"
    r"|\bcommitted locally\b|\bin sync with\s+(?:x|origin)\b"
    r"|\b(?:ahead of|behind)\s+(?:x|origin)\b|\bcurrent\s+(?:x\s+)?(?:checkout|branch)\b"
    r"|\bthis (?:branch|commit|diff|run|turn|session|case|scenario)\b"  # … and the case the agent traced
    # the change itself, described: "The staged diff is only …", "Main checkout was not touched", "`dist` is
    # not tracked, so it should not go into the PR", "Only … were updated", "X was changed to …", "all now at
    # 0.5.0", "No tests run, since this is a README-only change" (what is unrelated to it stays: "The
    # worktree has unrelated changes in README.md and `.entire/logs/entire.log`")
    r"|^(?!.*\bunrelated\b)(?:the |main |this )?(?:only )?(?:final |staged |current |whole |working )?(?:diff|changes|worktree|"
    r"working tree|checkout|repo changes|modified (?:paths|files))\s+(?:now |still |only |also )*(?:is|are|has|have|was|"
    r"were|contains?|shows?|adds?|includes?|remains?|touches|holds|looks|don'?t|do not|doesn'?t|does not|won'?t)\b"
    r"|\b(?:was|were) not touched\b|\b(?:edits|changes|fixes) are (?:all )?in\b|\bonly [^.;]{0,60}\buntracked\b"
    r"|\b(?:in|into|for) (?:the|this) (?:pr|pull request|diff)\b(?! (?:body|title|description|template|comments?)\b)"
    r"|(?:^|,\s*|\b(?:and|but)\s+)only\b[^.;]{0,120}\b(?:was|were|are) (?:updated|changed|modified|edited|touched|"
    r"wired|hooked up|implemented|added)\b|\bnow at\b"
    # a step of that day's diagnosis, the agent's choice of that moment, the session's own checkout: "…, so the
    # problem is in the CLI's layering", "DeepWiki is the right fit here because …", "Worktree `x` is created from …"
    r"|\bso the (?:problem|issue|bug|culprit) (?:is|must be|lies)\b|\b(?:the right|a good|the best) (?:fit|choice|tool|call) here\b"
    r"|^(?:the )?(?:new )?(?:worktree|branch)\s+x\s+(?:is|was|has been) (?:created|made|checked out|set up)\b"
    r"|\b(?:was|were) (?:just )?(?:changed|updated|modified|rewritten|refactored) to\b"
    r"|^no (?:tests?|checks?) (?:were |was )?(?:run|ran|needed)\b|\bthis (?:is|was) an? [\w/ -]{0,40}\bchange\b",
    re.I,
)
# The session's own helpers at work, not the project: "The worker is tasked with updating PR #1572",
# "The dispatched agent was instructed to …", "Worker `x` is created at …", "The first pass shows …",
# "…; the worker is iterating on formatter-only cleanup".
DELEGATED = re.compile(
    r"(?:^|[;:]\s+)(?:the |one |each |both |a )?(?:[\w-]+ )?(?:workers?|sub-?agents?|spawned agents?|dispatched agents?)"
    r"(?: `[^`]+`)?\s+(?:is |are |was |were |has |have |had |will |just |now |also )*(?:\w+ly )?"
    r"(?:tasked|instructed|asked|spawned|dispatched|created|started|finished|completed|consumed|found|reported|"
    r"confirmed|loaded|moving|running|executing|iterating|working|avoiding|updating|going|still|use|edit|read|"
    r"captured|wrote|ran|opened|closed|pushed|committed|merged|added|changed|fixed|returned|reports|said|says|"
    r"update|create)\b"
    r"|^(?:the )?(?:[\w-]+ )?prompt (?:explicitly |also )?(?:requires|asks|says|tells|wants|instructs)\b"  # a worker's task
    r"|^(?:the )?(?:first|second|next|latest|last|initial|detailed) (?:pass|look|read|check|tail|scan|sweep)"
    r" (?:shows|confirms|found|says)\b",
    re.I,
)
# A line ticked or crossed off, or cheered: a checklist's or an audit's report of that moment ("✅ Full
# access to `~/.ssh`", "❌ Read LSASS memory", "… and pushed! 🚀"), not how the project works.
STATUS_MARK = re.compile("[\u2705\u274c\u274e\u2713\u2714\u2717\u2718\u2611\u2612\U0001f680\U0001f389]")
# Trailing off ("… before Init runs...") or a quotation never closed ('"keys the CLI … runs, so the').
CUT_OFF = re.compile(
    r"(?:\.\.\.|…)\W*$|“[^”]*$|[\s,](?:or|and|but|because|the|an?)$"
)  # (… or at its next item: ", or")
QUOTED = re.compile(r"[\"“][^\n]*[\"”]\.?")  # '"Every device id MUST be a map link."', quoted whole
# … or unquoted: a rule shouted for a model to obey is a prompt's, written into the product ("EVERY device ID
# mention … MUST be a clickable map link", "ALWAYS use `https://…` as the base URL — NEVER use …").
SHOUTED = re.compile(r"\b(?:MUST|NEVER|ALWAYS|EVERY|DO NOT)\b")
# A warning said with force ("Never run the migration twice!"), unlike an exclamation of the moment.
WARNING = re.compile(r"(?:never|don'?t|do not|always|important|warning|caution|careful)\b", re.I)
# What the code lacks or still does wrong, or what is to change: "`getRecentEvaluations` doesn't
# include `parent_id`", "`plan_cmd.py` still calls `f` with the old kwargs", "needs to become `x`",
# "`resolveParentColor` currently walks `parents` front-to-back".
GAP = re.compile(
    r"\b(?:(?:doesn'?t|does not|don'?t|do not|didn'?t|did not) (?:yet )?(?:include|pass|set|have|handle|support|call|"
    r"return|contain|define|declare|check|match|exist|read|use)|(?:isn'?t|is not|aren'?t|are not|wasn'?t|was not) "
    r"(?:yet )?(?:set|passed|included|handled|defined|declared|called|used|wired|exported|registered|updated|"
    r"receiving|getting|passing|calling|returning|rendering)|needs? to (?:be|live|go) (?:in|inside|under|at)|"
    r"still (?:calls?|uses?|has|have|declares?|points?|references?|includes?|contains?|passes|imports?|expects?|"
    r"returns?|says?|shows?|lists?|mentions?|reads?|at)|missing|lacks?|needs? to (?:either )?(?:be )?(?:become|use|change|"
    r"update|remove|rename|pass|include|add|updated|changed|removed|renamed|fixed|added)|needs? \w+(?: \w+)? "
    r"(?:updated|changed|removed|renamed|fixed)|must (?:change|update|be (?:updated|changed|removed|renamed))|"
    r"should (?:be (?:updated|changed|renamed|removed|x\b)|use|include)|never (?:sets?|passes|calls?)|hardcode[sd]?|"
    r"(?:is|are) never (?:set|called|passed|used|read|written|created|initiali[sz]ed|cleared|updated|applied|invoked|reached)|"
    r"(?:was|were) (?:still |always |silently )?(?:skipping|dropping|ignoring|overwriting|returning|calling|using)|"
    r"(?:has|have) only|only (?:has|have)|today|currently|but (?:[\w`'.-]+ ){1,4}expects?)\b"  # "the drop is unconditional today": how it stands before the change
    r"|^the current\b(?! (?:x )?(?:checkout|branch)\b)"  # "The current `top_uploaders` tool only counts …"
    # "The root cause of the E2E failures is …" (not "The issue was that X uses Y": how X works)
    r"|^(?:The|So the) (?:root cause|issue|problem|bug|culprit)(?: of [^:,]{1,60})? is\b"
    r"|\bno longer (?:used|needed|called|read|referenced|imported)\b"  # dead code the session then removed
    r"|\b(?:is|are) (?:also )?(?:wrong|incorrect|in the wrong place)\b",  # "The `gain_weight` is also wrong (…)"
    re.I,
)
# … said of the thing itself, not in a condition or a relative clause ("it ignores any `SKILL.md`
# whose frontmatter does not include `name`": how the installer works).
CLAUSE = re.compile(r"\b(?:whose|which|that|where|if|when|unless|once|whether|any)\b", re.I)
# Not a sentence about the project but a list item, a plan's item or a change report: "Explains the one gotcha: …"
# (what a file does, its subject in the lead the item sits under), "Version bumped 0.3.0 → 0.4.0",
# "Skill rewritten: …", "Plan complete and saved locally to …".
FRAGMENT = re.compile(
    r"^[A-Z][a-z]+s\s+(?:(?:the|a|an|its|their|each|every|all|both|how|what|why|which|only|one)\b|`)"
    r"|^[A-Z][a-z]+s (?:back|out|over|through) (?:to|on|into)\b"  # "Falls back to `restoreSessionTranscript(…)` - …"
    # … or any object: "Launches Terminal and runs `claude`", "Reads CPU power from …" (not "Reads are cached"),
    # also after a condition: "On user input, calls `claude -p` with …"
    r"|^(?:(?:On|When|After|Before|Once|If|While)\b[^,]{1,60},\s+)?(?:(?i:always|also|only|never|still|now) )?"
    r"(?i:Launches|Loads|Reads|Uses|Extracts|Creates|Writes|Returns|Sends|Generates|Parses|Renders|Displays|Shows|"
    r"Adds|Removes|Opens|Starts|Converts|Fetches|Validates|Accepts|Provides|Exposes|Supports|Defines|Implements|"
    r"Detects|Resolves|Prints|Emits|Spawns|Installs|Copies|Deletes|Downloads|Uploads|Syncs|Computes|Replaces|"
    r"Injects|Passes|Receives|Wraps|Skips|Saves|Stores|Sets|Gets|Handles|Updates|Calls|Runs|Checks|Builds|Publishes|"
    r"Subscribes|Dispatches|Queries|Produces|Consumes|Listens|Connects|Invokes|Executes|Exports)\s+"
    r"(?!(?:are|is|were|was|can|cannot|can't|must|should|will|would|may|might|need|live|have|do|don't|also|now|"
    r"still|of|to|that|which|and|or)\b)"
    # a plan's item, "what - what to do with it": "`land_pr` tests - update from `X` to …"
    r"|^.{3,100}?(?:\s[-–—]|`:|\.\w{1,5}:)\s(?i:remove|update|add|rename|move|drop|replace|delete|fix|use|keep|change|switch|"
    r"make|set|extract|split|merge|convert|introduce|wrap|migrate|inline|simplify|need to|needs to)\b"  # … or "`app.module.ts`: remove the `x` conditional"
    # … or what a prompt or a skill is to tell its model: "For large files, instruct it to use `rg -n -F` …"
    r"|^(?:[^,]{1,60},\s+)?(?i:instruct|tell|ask|have) (?:it|them|the (?:agent|model|skill|prompt|llm|bot))\b"
    # an option of the agent's list, a review's comment or thread, a finding with its severity: "A) Only on
    # explicit …", "Comment 1 (id: 27566): Suggests …", "Thread 27635 (Copilot): …", "`X` doesn't update `Y` (Medium)"
    r"|^[A-H]\)\s|^(?:Comment|Thread|Review|Finding|Item)\s+#?\d+\b"
    r"|^.*\((?i:low|medium|high|critical|minor|major|nit|p[0-3])\)\W*$"
    r"|^(?:\*\*)?(?:Low|Medium|High|Minor|Major|Nit|Blocker|P[0-3])(?: (?i:severity|priority))?(?:\*\*)?\s*(?::|—|–| - )\s"
    # a step of the plan, said as an order: "Switch entry point to `training/train.py`.", "Compare this to …"
    # (NARRATION, always read beside this, has the agent's instructions: "Replace", "Drop", "Re-run" …)
    r"|^(?:Switch|Compare|Swap|Split|Convert|Migrate|Bump|Rerun|Launch|"
    r"Increase|Decrease|Reduce|Lower|Raise|Enable|Disable|Mock|Stub|Rewrite|Patch|Adjust|Tweak|Restore|Fold|"
    r"Reply|Answer|Pick|Choose)\s+"
    r"(?!(?:in|of|is|are|was|were|to|for)\b)"
    # a list's item under its label, what it gains: "Better call tracking: Using Sinon's `getCalls()` …",
    # "Single pass through data: No need to call …"
    r"|^[A-Z][\w -]{2,40}:\s+(?:Using|Uses|No need|No more|Now|Avoids?|Eliminates?|Reduces?|Improves?|Prevents?|"
    r"Faster|Fewer|Less|More|Better|Simpler|Cleaner)\b"
    # a plan's item under its subject: "CLI invocations using `--pr`: Must change to `--planned-pr`"
    r"|^[^:]{3,100}:\s+(?:Must|Should|Needs?|Has to|Have to)\b"
    # a list's item, a name and what it is for, no verb of its own: "`Bash(mkdir/rm)` for the shell commands it uses"
    r"|^`[^`]+`\s+for\s+(?:the|a|an|its|each|every|all)\b(?![^.;]*\b(?:is|are|was|were|has|have|must|needs?|requires?"
    r"|runs?|fails?|can(?:not|'t)?|won'?t|should)\b)"
    r"|^(?:New\s+)?(?:(?!(?:is|are|was|were|has|have|had|uses?)\b)\S+\s+){1,3}"
    r"(?:rewritten|bumped|saved|added|updated|created|removed|renamed|moved|deleted|replaced|reworked|dropped|"
    r"consolidated|converted|migrated|switched|simplified|refactored|inlined|triggered|queued|started|rendered|verified)\b"
)
# What a plan changes there, said as a noun: "— GetSessionLog method deletion", "— `.Path()` changes".
CHANGE_NOUN = re.compile(r"\b(?:changes|deletion|removal|addition|rename|clean-?up|refactor(?:ing)?)\W*$", re.I)
# A review's finding named for its kind of fault: "Silent data loss when …", "Missing error check after …"
# (`user_words.FINDING` is a finding pasted by the user, said as what the code can do wrong).
FAULT_NAMED = re.compile(
    r"(?:Silent|Missing|Unused|Potential|Possible|Redundant|Duplicated?|Unchecked|Unhandled|Dead|Inconsistent|"
    r"Incorrect|Wrong|Broken|Misleading|TOCTOU|Race(?: condition)?|Deadlock|Memory leak|Leak|Off-by-one|N\+1|"
    r"(?:SQL |Command |Prompt )?[Ii]njection|XSS|CSRF|SSRF|Null (?:pointer|dereference)|Unbounded|Unvalidated)\b"
    # … or as a headline, without its verb: "Chunking errors silently ignored"
    r"|(?![^.;]*\b(?:is|are|was|were|gets?)\b)(?:[\w-]+ ){1,4}(?:silently|never|not) (?:ignored|dropped|swallowed|lost|"
    r"leaked|checked|closed|handled|discarded|skipped|propagated|logged|released)\b"
    r"|(?:`[^`]+`|[\w-]+)(?: [\w-]+)? (?:declared|defined|imported|assigned) but (?:never|not) used\b"  # a linter's
)
# What one test does or needs while the work is under way: "The test calls with `--branch P65`",
# "`test_close_plan` (line 22) uses …", "The tests `test_a` and `test_b` are testing …".
ABOUT_A_TEST = re.compile(
    r"^(?:The|This|That|Each|Every|These|Those|One|Two|Three|Four|Five|\d+)(?: [\w-]+){0,2} (?:tests?|mocks?|stubs?)\b"
    r"|(?<![\w/.-])test_\w+(?![\w.])|`Test[A-Z]\w*`"  # … or a Go test by name: "`TestResume_LocalLogNewer` - …"
    r"|\bwhat the tests? expects?\b"
)
WAS = re.compile(r"(?:was|were|is now|are now|now)\b", re.I)
_BREAKS = re.compile(  # … not what no longer breaks ("now lands on `v4.40.1` instead of failing")
    r"(?<!instead of )(?<!rather than )(?<!without )(?<!no longer )\b(fails?|failing|breaks?|crash(?:es)?|errors? (?:out|with))\b",
    re.I,
)
_FAILING_NOW = re.compile(_AT_HAND + "$", re.I)


def breaks(plain: str) -> bool:
    """`plain` says what something breaks: a lesson. Not what fails at that moment ("…, but that's
    failing", "`git fetch` is currently failing because …"): `STATE`."""
    return any(
        m[1].lower() != "failing" or not _FAILING_NOW.search(plain[: m.start()]) for m in _BREAKS.finditer(plain)
    )


HYPOTHETICAL = re.compile(r"\b(would|could|might|should|proposal|propose|option|plan|suggest|recommend)", re.I)
