"""Sentences true only of the day they were written, whatever lasting cue they carry: one run's
output, a tracker's status, a review's verdict and findings, a plan's step, the session's own
report (`OF_THAT_DAY`); a bug's symptom or one run's trace while it is hunted (`SYMPTOM`).
`facts.fact_score` reads them; `evidence` reads `OF_THAT_DAY` in the user's words too.
"""

from __future__ import annotations

import re

# A review checklist's verdict before what it checked: "Entropy sources correct: `generateEd25519Keypair()` uses
# …", "Everything else looks structurally fine: Codex, Cursor, and OpenCode point at …" (`best_facts` keeps what
# follows it).
VERDICT_LEAD = re.compile(
    r"^[A-Z][\w -]{2,40}? (?:is |are |looks? |seems? )?(?:\w+ly )?(?i:correct|verified|confirmed|ok|fine|sound|"
    r"reasonable)\s*(?::|—|–| - )\s*"
)
_HEX_ID = r"(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b"  # a commit's short or full hash: a digit and a letter
# What `STATE` cannot see once code spans are blanked: a timestamp in a name, one run's output ("The failed rerun
# artifact is at `.agentv/results/2026-07-06T12-14-22-898Z`"); a commit not yet on the remote's branch ("… but it
# is not on `origin/main`"; not "`~/go/bin` is not on `PATH`"); a tracker item's status ("remains `in_progress`").
OF_THAT_DAY = re.compile(
    r"\d{4}-\d{2}-\d{2}[T_]\d{2}[-:]\d{2}|\b(?:is|are|was|were)(?:n'?t| not)(?: yet)? (?:on|in) `?(?:origin|upstream)/"
    r"|\b(?:remains?|stays?|is still) `(?:in[_ ]progress|open|blocked|pending)`"
    r"|\b(?:commit|SHA) \(?`?[0-9a-f]{7,40}\b`?"  # a commit by its hash: history, in `git log` ("The commit `c384b36` changed …")
    rf"|\b(?:branch|checkpoint|session)s? `[^`]*?\b{_HEX_ID}"  # "branch `entire/765563b`"
    rf"|\b(?:is|are|was|were|now) at `?{_HEX_ID}"  # "… v1 is at b8d967c"
    r"|^Lines? ~?\d+\b|^`[\w./-]+:\d+(?:-\d+)?`"  # a line of the file as it was: "Line 223 tries …", "`hsim:1000` …"
    # a plan's step by its id ("S3 - integration RED -> GREEN: …"), one failure's diagnosis ("The build error: …")
    r"|^[A-Z]{1,2}\d{1,3}\s+[-—–]\s|^(?:The|This) (?:build |test |compile |runtime |CI )?(?:error|failure|crash|hang)\s*:"
    # a part of the document the session wrote: "Design Rationale section: five paragraphs explaining …"
    r"|^[A-Z][\w -]{2,40} (?:table|section|diagram|paragraph|chapter|appendix):\s"
    # what is left to do, without its subject: "⚠️ Still requires type migration for `x`", "⚠️ Need to use …"
    r"|^\W{0,4}Still\b|^⚠\ufe0f?\s*(?:Needs?|Requires?)\b"
    # a case and what to do or expect then: "Delta sync: `knowledge>0` → Load only changed …", "Seat 1 folds → it
    # should progress to showdown"
    r"|\s(?:→|->|=>)\s+(?:[A-Z][a-z]+\s|(?:it|they|this|that) (?:should|must|will)\b"
    r"|(?:align|reuse|extend|adopt|mirror|copy|move|replace|rename|split|merge)\b)"  # "`X` uses … → reuse for …"
    # an option's pro or con ("Easier to maintain: when you …"), a noun phrase's item ("Only entities with `x > y`")
    r"|^(?:Easier|Harder|Simpler|Cleaner|Faster|Slower|Safer|Riskier|Better|Worse|More|Less) [a-z]+(?: [a-z]+)?:\s"
    r"|^Only [a-z]+s (?:with|whose|that|which|in|from|of)\b(?!.*\b(?:are|is|were|was|get|can|must|will)\b)"
    # … or a check's status line: "1Password CLI (`op`) - Not found in PATH (may need a new terminal, …)"
    r"|^[^:—–]{2,60}?\s[-—–:]\s+(?:Not (?:found|installed|available|running|set|present)|Installed|Found|Available|"
    r"Running|Present|Absent)\b"
    # a review's verdict, whatever the sentence says beside it: "… is actually correct as-is — when the key fails
    # to decrypt, …", "…, which reads as a bug rather than a documented limitation", "… — that's correct",
    # "Entropy sources correct: `generateEd25519Keypair()` uses …" (a checklist's line)
    r"|(?i:\bcorrect as[- ]is\b|\b(?:is|are) actually correct\b"
    r"|\b(?:reads|looks|comes across) (?:as|like) an? (?:bug|regression|mistake|oversight)\b"
    r"|\b(?:that|this|it)(?:'s| is) (?:misleading|wrong|incorrect|correct)\b"
    r"|\b(?:it|this|that) (?:reads|would read) (?:as|like)\b)"  # an option's reading: "If `runs` is top-level, it reads as …"
    r"|"
    + VERDICT_LEAD.pattern
    # a check's result, the work's status: "Diff check confirms requested dirs are mirrored", "Path refactor
    # itself is complete and validations pass"
    + r"|(?i:^(?:the |a )?[\w./`-]+(?: [\w./`-]+){0,3} (?:check|checks|diff|validation|verification|scan|audit)"
    r" (?:confirms?|confirmed|shows?|showed|verifies|verified)\b"
    # (the work's own status, not a condition: "A run is finished when its state is Completed" stays)
    r"|^(?![^,;:]*\b(?:when|once|if|after|until|before|whether)\b)[^,;:]{0,60}?\b(?:is|are) (?:now )?"
    r"(?:complete|completed|finished)\b"
    r"|^(?:previously|formerly|until now|before (?:this|the|my) (?:fix|change|patch)),"  # how it was before the change
    # where the change went: "Updates live in `package.json`, …", "Plan and documentation updates are in …"
    r"|^(?:the |all )?(?:[\w-]+ )?(?:(?:and|&) [\w-]+ )?(?:updates|changes|fixes|edits|tweaks) (?:live|are|went|sit)"
    r" (?:in|under|into)\b"
    r"|\b(?:is|are) (?:currently|now|still) expected to (?:fail|pass)\b"  # a test-first run's red step
    # a linter's finding: "`src/app/page.tsx`: `ChevronLeft`, `Button` unused."
    r"|^[^:]{1,120}:\s+`[^`]+`(?:(?:,\s*|,?\s+and\s+)`[^`]+`)*\s+(?:unused|undefined|not used|never used)\W*$"
    # … what is left to do: "One fix needed in `train_cnn.py`: …", "Biggest concrete fixes needed before ship: …"
    r"|^(?:(?:the )?(?:[a-z]+ ){0,3}(?:fix|fixes|change|changes)|(?:one|two|three|a|the) (?:more |last |remaining )?"
    r"(?:thing|things)) (?:still )?(?:needed|left|remaining)\b)"
    # a training run's progress: "Training is at epoch 53/100", "val loss went from 0.150 → 0.056",
    # "training plateaued after epoch 3"
    r"|\b(?:is|was|are|were) (?:now |still |currently |just )?(?:at|on|past) (?i:epoch|step|iteration) \d"
    r"|\b(?i:epoch) \d+\s*/\s*\d+|\bfrom ~?\d*\.\d+\s*(?:→|->|to) ~?\d*\.\d+|\bfrom ~?\d+(?:\.\d+)?\s*(?:→|->)\s*~?\d"
    r"|\b(?i:loss|accuracy|acc|f1|mse|mae|perplexity|ppl)\w*`?:? ~?\d*\.?\d+\s*(?:→|->)\s*~?\d"  # "Type loss: 1.9 → 1.15"
    r"|\b(?i:plateau(?:ed|s)?)\b[^.;]{0,40}\b(?:at|after) (?:(?i:epoch) )?~?\d"
    # a review's graded finding ("FINDING 6 [INFORMATIONAL]: …"), the diff's scope ("Only TypeScript files
    # changed - …"), what it still wants checked ("… but need to verify …") or approves ("properly handles")
    r"|\[(?:INFO(?:RMATIONAL)?|LOW|MEDIUM|HIGH|CRITICAL|BLOCKER|NIT|P[0-3])\]|^(?:FINDING|ISSUE) #?\d+\b"
    # … graded in words ("Critical: Side-pot payout ignores …", "Low risk in practice since …"), not a
    # warning said with force ("Critical: never run the migration twice")
    r"|^(?:Critical|Major|Minor|Blocker|Nit|High|Medium|Low)(?: (?:risk|severity|priority|impact))?:\s+"
    r"(?!(?i:always|never|do not|don'?t|must|make sure)\b)|^(?:High|Medium|Low) risk\b"
    r"|(?i:^only [\w/+ -]{1,40} files? (?:changed|modified|touched)\b"
    r"|\b(?:but )?(?:still )?need to (?:verify|check|confirm|investigate|test)\b|\bproperly (?:handles|validates|checks|closes)\b)"
    # a review's suggestion ("… - The `shipped?` helper could be more defensive …"), where the change at hand would
    # go ("The cleanest place to add this rounding is in …"), a line by its number ("… is called (88 in `a.rb`)")
    r"|\bcould (?:be|get) (?:a bit |much |even )?(?:more|less|better|cleaner|simpler|safer|faster|clearer)\b"
    r"|^(?:The|A) (?:cleanest|best|simplest|easiest|right|natural|obvious) (?:place|spot|way) to \w+ (?:this|that|these|the new)\b"
    r"|\((?:line |L)?\d+(?:-\d+)? in `[^`]+`\)"
    # what a commit held ("Only … were included; … remain uncommitted"), a check's one finding ("The only flagged
    # item is …"), a spec's stories and tasks by their ids ("… in US2 should …", "T014")
    r"|\bremains? (?:uncommitted|unstaged|unpushed|untracked)\b|^Only [^;]{0,120}? (?:were|was) (?:included|committed|staged)\b"
    r"|^The only (?:flagged|remaining|failing|open|skipped) (?:item|issue|finding|test|check|warning)s? (?:is|was)\b"
    r"|\bUS\d{1,2}\b|\bT\d{3}\b|\b(?:FR|NFR|SC)-\d{3}\b"
    # a review's bookkeeping ("Medium/low findings deferred …"), one run after another ("`x` then fails …"), the
    # tree and the machine as they stood ("… calls `x` (wrong name)", "… isn't installed either", "… was empty earlier")
    r"|^(?:(?:Critical|High|Medium|Low)(?:/(?:critical|high|medium|low))* )findings? (?:deferred|fixed|addressed|left)\b"
    r"|\bthen (?:fails|failed|errors|errored|crashes|crashed|hangs|hung)\b"
    r"|\((?:wrong|incorrect|bad|stale|outdated) (?:name|path|value|command|flag|target)\)"
    r"|\b(?:isn'?t|is not|aren'?t|are not) installed either\b|\b(?:was|were) (?:absent|missing|empty|broken) earlier\b"
    # a finding's label before a dash: "No `package-lock.json` - …", "DevDependencies needed - …"
    r"|^No `[^`]+`\s[-—–]\s|^[\w` -]{2,40}? needed\s[-—–]\s"
)
# One run's symptom or trace while a bug is hunted, false once it is fixed: what should happen and does not
# ("After processing `a.obs`, it should see … again, but it doesn't", "… should exist here, but the files are
# in …"), a name not found by the code at hand ("… but `ret x;` can't find it"), a value where another was
# expected ("The name is `"@"` instead of `"x"`"), a call's path through that run ("`get_type()` tries to find
# `x`, doesn't find it, …", "… which fails because `x` hasn't been registered yet", "… it should hit the
# `Declare` handler"), what a run returned ("… `get_var()` returned `None`").
SYMPTOM = re.compile(
    r"\bshould\b[^.;]{0,160}?,? but\b"
    r"|\bbut (?:it|they|this|that) (?:doesn'?t|does not|don'?t|do not|isn'?t|aren'?t|didn'?t|did not)\W*$"
    r"|\b(?:can'?t|cannot|couldn'?t|doesn'?t|does not|didn'?t|did not|fails? to|failed to) find (?:it|them)\b"
    r"|\bwhich (?:doesn'?t|does not|can'?t|cannot|didn'?t) find\b"
    r"|\b(?:is|are|was|were) (?:just |still )?`[^`]+` instead of `[^`]+`"
    r"|\btries to\b[^.;]{0,120}?\b(?:doesn'?t|does not|fails|which fails)\b"
    r"|\bhas(?:n'?t| not) been \w+ yet\b"
    r"|\b(?:it|this|that) should (?:hit|reach|go through|enter|trigger)\b"
    r"|\breturned `[^`]+`"
    r"|\bbut the actual\b|\binstead of the expected\b"  # "Tests expect `A` but the actual name is `B`"
    # … the defect as it stood ("… is incorrectly passing …", "… a `config` argument that isn't being passed")
    r"|\b(?:is|are|was|were) (?:incorrectly|wrongly|mistakenly) \w+ing\b|\bcompletely ignor(?:ing|ed)\b"
    r"|\bstill \w+s\b[^;]{0,160}?\binstead of\b"  # … what the fix left: "… still sends … instead of …"
    r"|\b(?:isn'?t|aren'?t|is not|are not|wasn'?t|weren'?t) being (?:provided|passed|set|called|loaded|used|applied)\b"
    # … where that run's error came from, what its output shows ("… (notice the other path)")
    r"|\b(?:error|failure|crash|exception) (?:is|was) (?:now )?coming from\b|(?:^|[-(—–]\s*)notice (?:the|that|how)\b"
)

# The next run narrated, not the failure explained: "But now the error is different - it complains …"
NEXT_RUN = re.compile(
    r"\b(?:error|failure)(?:'s| is| has) (?:now )?(?:different|changed)\b|\b(?:a )?(?:different|new) error\b", re.I
)
