"""The user's own words in a session: which sentences state a standing wish.

Real sessions are mostly task instructions ("fix the failing test"), and a memory that keeps them
as rules is obeyed wrongly in every later session. A standing wish has a rule cue ("don't", "X
should live in Y", "use A, not B", "from now on") or restates one ("I told you…", "my workflow
is…"); `is_rule` says which sentences are one — not an edit of the text or thing on screen
("just say docs", "remove that"); the sentences it reads are the user's own (`typed`).
"""

from __future__ import annotations

import re

from dsh_memory.phase1.chinese import is_chinese, is_chinese_rule
from dsh_memory.phase1.clean import CODE, TASK_VERB, clip, is_marker, is_table_row

# "every time" said of the work's steps: "commit changes as you go", "update the changelog after each feature",
# "as each task is completed" (not "add a blank line after each heading": a place in the text at hand)
_EACH_TIME = (
    r"\bas (?:you|we) go\b|\b(?:after|as|once) each (?:\w+ ){0,2}?(?:is|are|gets?|has been)\b"
    r"|\bafter (?:each|every) (?:task|step|change|feature|commit|fix|phase|session|iteration|milestone|release|merge"
    r"|deploy)s?\b"
)
RULE_CUE = re.compile(
    # (… "to avoid these issues" is a purpose, no order; "remember to avoid …" is one)
    r"(^|[:;,]\s*|\b(?:please|and|but|so|just|i|we|you|should|(?:try|want|need|remember) to|to(?!\s+avoid\b))\s+)"
    r"(?:(?:in|for|on|when|with|inside)\b[^,.;:]{0,40}?\s)?(don'?t|do not|never|always|avoid|stop\s+\w+ing)\b"
    r"|\bdoesn'?t need|\bno need to\b|\bi (?:like|usually|tend) to\b|\bi'?d rather\b"
    # "I prefer …", "Prefer `uv` …", "always prefer …": the user's wish, not "the guidance to prefer …"
    r"|(?:^|[:;,]\s*|\b(?:i|we|you|i'?d|we'?d|please|always|generally|usually|strongly|really)\s+)prefer\b"
    r"|\bshould(?:n'?t)? (?:not |never |always )?(?:live|be|use|go|stay|run|have|include|start|keep)\b"
    r"|\bmust(?:n'?t)?\b|\bmake sure\b|\bfrom now on\b|\bevery time\b|\bwhenever\b|\binstead of\b|\brather than\b"
    rf"|{_EACH_TIME}"
    r"|\bonly exactly\b|\bwill (?:cause|break)\b|\bbreaks\b|\bin this repo\b|\bwe use\b"
    r"|\bit would be (?:great|better|nice) if\b|^use\b[^.!?]{1,80},\s*not\b"
    r"|^remember\b|,\s+not\s+(?!sure\b|certain\b)(?:the\s+)?[`\w]|\bneeds? [^.!?]{1,60}\bfirst\b(?![\s-]+time)|\b(?:is|are) only\b|\bonly (?:done|run|used|deployed) by\b"
    # A naming scheme, a placeholder in it: "name it aie[xxx], [xxx] the python version", "call branches feat/<ticket>"
    r"|^(?:name|call|prefix|suffix)\s+(?:it|them|(?:each|every|all|the)\s+\w+|\w+s)\s+[^.!?]{0,40}?[\[<{][\w .-]{1,24}[\]>}]",
    re.I,
)
# "name it …", "put them …", "only exactly what's needed", "must be controlled by …": a rule said of
# what the sentence before names ("create a conda environment.", "can you make permissions tighter?",
# a list's item before).
NEEDS_BEFORE = re.compile(
    r"^\w+\s+(?:it|them)\b|^(?:only|just|not|no|nothing|none|exactly)\b(?:\W+\w+){0,3}\W*$"
    r"|^(?:must|should|needs? to|has to|have to)\b",
    re.I,
)
MAX_BEFORE_CHARS = 120
# The user restating what they want: a correction says a standing wish louder than the first time.
CORRECTION = re.compile(
    r"\b(what i (?:said|meant|asked for) (?:was|is)|(?<!not what )i (?:told|asked) you|as i said|like i said|i said to)\b"
    r"|\bmy (?:usual )?(?:flow|workflow|process|habit) is\b|\bon every (?:machine|computer|system|platform)\b"
    r"|\b(?:isn'?t|is not|aren'?t|are not|might not be|may not be) (?:always )?(?:available|installed) (?:on|in|everywhere)\b",
    re.I,
)
MAX_RULE_CHARS = 180  # a standing rule is said in a sentence; a longer one is a task description
RULE_TEXT_CHARS = 220  # a kept rule, with the sentence before it when it needs one
ONE_OFF = re.compile(
    r"\b(for now|this time|right now|for this (task|pr|change|one)|in this (pr|change|task|commit)|"
    r"for this(?=\s*(?:[,.;!?]|$|but\b|and\b|first\b))|"  # "Make a plan for this but don't execute"
    r"today|at the moment|at this (?:point|stage)|temporarily|never ?mind|let'?s see (?:if|whether|how|what))\b"
    r"|^(?:for (?:example|instance)|e\.g\.),",  # an example of the thing at hand ("For example, 'a' should be 'b'.")
    re.I,
)
# The work at hand discussed, not a standing wish: "The question is if it should have a start
# color", "There needs to be a decision on whether…", "Use your best guess…", "On bullet 1, do not
# unignore the folder", "The shading is now correct, but I still feel the steps are too large".
AT_WORK = re.compile(
    r"\bthe question is\b|\bwhether or not\b|\bneeds? to be a decision\b|\b(?:use|take) your best guess\b"
    r"|\byour call\b|\bup to you\b|^(?:on|in|for|about) (?:bullet|item|point|step|option|number|line|#)\s*\d+\b"
    r"|\b(?:is|are|looks?) now (?:correct|right|fixed|good|better|fine|ok)\b|\bi still (?:feel|think|see)\b"
    # a question without its mark ("…, can you confirm.", "… do you think that's going to need much code"),
    # a clarification of the request ("i meant for entireio/cli which we set up …")
    r"|\b(?:do you think|can you confirm|could you confirm|is that right)\b|^(?:no,?\s+)?i meant\b"
    r"|^like,?\s+(?!i (?:said|told|asked)\b)(?:\w+\s+){0,2}?(?:move|make|keep|put|do|add|take|use|change|split)\b"
    r"|^(?:it )?(?:(?:looks|sounds) like|seems|appears)\b"  # a finding: "looks like i dont need the token"
    r"|^(?:it|we|you|this|that|they)\s+(?:seems?|appears?) to\b|\b(?:we|you) (?:can|could) always\b|^q\s*:"
    # what should have been done, this time: "I should have checked both sensors before concluding"
    r"|\bshould(?:n'?t)? have (?:\w+ed|been|done|seen|known|gone|made|taken|told|thought|written|run|read)\b"
    # … not understanding the agent's answer: "i don't completely understand."
    r"|\bi (?:still )?(?:don'?t|do not|dont) (?:\w+ly )?(?:understand|get (?:it|this|that|why)|follow)\b"
    # where the work is now: "remember we are on a $TEMP_DIR context", "we're in the release branch"
    r"|\bwe(?:'re| are) (?:now |still )?(?:on|in) (?:a|an|the|this|that|our) [\w$./ -]{0,30}?(?:context|branch|worktree|"
    r"checkout|directory|folder|dir|environment|env|sandbox|copy)\b"
    # how the checkout should stand now: "there should not be any changes"
    r"|^there should(?:n'?t| not)? be (?:any |no )?(?:changes|diffs?|differences|modifications|uncommitted)\b",
    re.I,
)
# A review's finding on the code at hand, often pasted from a review bot: what it can do wrong ("That
# lookup can panic and abort the run"), an item "what - fix" ("Quadratic scan in overlap.go - should use
# a map"). A rule with a strong cue stays one ("Never index a map unchecked, a nil entry can panic"), and
# so does a practice and what it breaks ("Committing the build folder can break the deploy").
FINDING = re.compile(
    r"^(?!\w+ing\b).*?\b(?:can|could|may|might) (?:panic|crash|break|fail|hang|leak|race|deadlock|abort|overflow|corrupt)\b"
    r"|^[^!?]{3,80}?\s[-–—]\s+(?:should|needs? to|must)\b",
    re.I,
)
# The task wanted ("I just want a collector …", "we should have a bead to …") or a change to the thing
# on screen ("the style should be more consistent"), unless it says its reach ("I want you to always …").
TASK_WISH = re.compile(
    r"^(?:i (?:just |only |really )?(?:want|need|would like)|i['’]?d like) (?:a|an|the|to|you to)\b"
    r"|\bi['’]?d prefere? (?:if|that) (?:it|this|that|they|these|those)\b"  # "I'd prefer if it's moved to …"
    r"|\bwould be (?:great|nice|good|helpful|useful) if (?:we|you) (?:can|could)\b"  # "would be great if we can …"
    r"|\bthe (?:behaviou?r|feature|change|fix) (?:they|the client|the customer|product|design|users?) wants?\b"
    r"|\blet'?s (?:make|add|create|try|write|build|move|put|rename|split|do)\b"  # "…, let's make an Agent class"
    r"|\bwe should (?:have|create|add|make|open|file|write|build|spawn|start|run|use) (?:a|an|another|one|some|\d+"
    r"|two|three|four|five|six|seven|eight|nine|ten)\b"  # "WE should have 6 parallel debugger agents at a time"
    r"|\bshould (?:be|look|feel|read) (?:a bit |a little |much )?(?:more|less)\b"
    r"|\bwe should be able to\b"  # "We should be able to know when the sync is done with that."
    r"|\bshould (?:be|stay|remain) (?:visible|shown|displayed|hidden|clickable|enabled|disabled|highlighted)\b",
    re.I,
)
# "That line doesn't need to change": said of the thing at hand, not of how the project works
# ("This repo doesn't need a lockfile" is a rule).
DEICTIC = re.compile(  # (after a lead: "Besides publish and unpublish, that should be …")
    r"^(?:[^,]{1,80},\s+)?(?:that|this|these|those)\s+(?!(?:repo|repository|project|codebase|workspace|team|company|package|app)s?\b)"
    r"(?:\w+\s+){0,2}?(?:doesn'?t|does not|don'?t|do not|isn'?t|is not|aren'?t|are not|should|needs?|must)\b"
    r"|^it\s+(?:should|needs?|must|doesn'?t|does not|isn'?t|is not)\b"  # "it should be separated to that"
    r"|^they\s"  # "they are described in the doc …": what "they" are, the message before says
    # … or what not to do with the things on screen: "…, we shouldn't keep those icons"
    r"|^[^.;]*?\b(?:shouldn'?t|should not|don'?t|do not|doesn'?t need to)\s+\w+\s+(?:those|these)\s+(?!(?:kinds?|types?|sorts?)\b)\w",
    re.I,
)
# "in fact, I prefer u dont", "avoid inventing our own.": the rule is the sentence before; alone it says nothing.
ELLIPTIC = re.compile(  # (… or an answer: "Nope, I don't think so.")
    r"\b(?:don'?t|not|won'?t|shouldn'?t|didn'?t|(?:our|your|their|my) own|(?:don'?t|not) (?:think|believe) so)\W*$",
    re.I,
)
# "I think we should use green here", "maybe we don't need the flag": a proposal for the work at
# hand. A hedged rule that says its reach ("I think we should always squash") stays one.
HEDGE = re.compile(
    r"\b(?:i think|i don'?t think|i guess|i feel like|maybe|perhaps|probably),?\s+(?:\w+\s+){0,4}?"
    r"(?:should|could|can|might|would|needs?|don'?t|do not|shouldn'?t)\b"
    r"|^there (?:may|might|could) be\b",  # a guess about the bug at hand: "There may be more reasons …"
    re.I,
)
# "I honestly feel that the risk is quite low": an opinion on the work at hand, unless it says its reach.
OPINION = re.compile(  # … or a remark in the discussion: "I'm also challenging the fact that …"
    r"^i (?:\w+ )?(?:feel|believe) (?:that|like)\b"
    r"|^i'?m (?:also |just |still )?(?:challenging|questioning|wondering|not sure|curious|confused)\b",
    re.I,
)
GUESS = re.compile(r"(?:i think|i guess|maybe|perhaps|probably)\b", re.I)  # "i think X is …": no user fact
REACH = re.compile(  # … not "don't always" ("sometimes")
    r"\b(?:(?<!n't )(?<!not )(?<!dont )always|never|from now on|every time|whenever|everywhere|everything|in general|going forward"
    r"|in (?:this|every|any|all) (?:repo|repository|project|codebase)s?)\b",
    re.I,
)
# "remove that", "we should use the one in cli/ as an example", "Maybe these two parts should…",
# "dont say branch from main yet", "X is awkward here": said of the thing on screen, meaningless in
# another session ("don't use npm here", an order with its cue first, is a rule of the repo).
AT_HAND = re.compile(
    r"\b(?:(?:that|this) one|the one (?:in|at|from|on|for)|(?:these|those) (?:two|three|four|parts|lines|sections|bits)"
    r"|remove (?:that|this|it|them)|as an example)\b|\b(?:yet|then)\W*$"
    r"|\bthe (?:whole|entire) [\w -]{1,40}\bsection\b"
    r"|\blines? \d+(?:\s*[-–]\s*\d+)?\b"  # "Instead of lines 235-236:", "the comment on line 779": the code on screen
    r"|\bwith (?:this|that|these|those) (?:info|information|change|changes|fix|data|details|findings|feedback)\b"  # "we dont need to do the whole cross agent section": the doc at hand
    # a step of this task's git work held back, or its files bounded: "do not commit anything", "don't bump
    # version", "Do not commit.", "Do not edit README or any other file."
    r"|\b(?:should|needs? to|must) be (?:updated|changed|renamed|replaced|rewritten|reworded) to\b"  # "… to: 'Lines added'"
    r"|\bshow me\b"  # what this session is to show
    # an answer to the agent's question ("I dont have anything to add", "I don't know yet") and how to read
    # what was just pasted ("do not pay attention that they are numbered")
    r"|\bi (?:dont|don'?t|do not) (?:have|know|see|remember|recall|mind|understand)\b"
    r"|\b(?:dont|don'?t|do not) pay (?:any |much )?attention\b"
    # the work before this, and the review at hand: "the same clean break strategy from before", "There are
    # some other comments that look valid"
    r"|\b(?:as|from) before\b|^there (?:are|is) (?:\w+ ){0,2}(?:comments?|issues?|errors?|warnings?|findings?|failures?)\b"
    # an item of this task's list ("3- Text in tables, should be …"), one more wish for it ("… the logo too."),
    # feedback on what was just made ("Links work, but the map should …")
    r"|^\d{1,2}\s*[-.)]\s|\btoo\W*$|^[\w ]{1,30}\b(?:works?|worked|is fine|are fine|looks? (?:good|fine|great))\W+but\b"
    r"|\b(?:don'?t|do not) (?:fix|change|touch|modify|edit|implement|write) anything\b"
    r"|\b(?:these|those) (?:commits|files|changes|tests|branches|functions|errors|warnings|comments|prs|issues)\b"
    r"|\b(?:don'?t|do not)(?: need to)? (?:commit|push|merge|bump|deploy|release|publish|tag)(?: (?:anything|it|this|that|them|"
    r"(?:the )?version))?\W*$|\b(?:don'?t|do not) (?:edit|touch|change|modify)\b[^.;]{0,40}\bother files?\b",
    re.I,
)
# "instead of saying Entire Skills tutorial just say skills tutorial": the wording of the text
# being written, an edit; a wording rule says its reach ("never call it…", "everywhere").
WORDING = re.compile(r"\b(?:say|saying|word|wording|phrase|phrasing|mention|highlight)\b", re.I)
HERE = re.compile(r"\bhere\b", re.I)
ORDER = re.compile(r"^(?:please\s+)?(?:always|never|don'?t|do not)\b", re.I)
# "for the cli pr make sure …": an instruction for one piece of work.
FOR_ONE = re.compile(
    r"\bfor (?:the|this|that|your) (?:[\w-]+ )?(?:pr|pull request|change|commit|task|issue|ticket|branch|release)\b",
    re.I,
)
# "The name will cause issues": what the thing at hand would do, said of it, not of a practice
# ("committing lockfiles breaks CI", "`npm` breaks the lockfile", "it breaks CI if you …" stay).
REMARK = re.compile(r"^(?:the|this|that|it|these|those)\b[^,.;:`]{0,25}?\s(?:will (?:cause|break)|breaks)\b", re.I)
# "This removes a source of drift and makes the total exact rather than estimated.": what the change does.
EFFECT = re.compile(
    r"^(?:this|that|it)\s(?:\w+\s)?(?:eliminates|removes|makes|ensures|prevents|improves|reduces|avoids|introduces"
    r"|fixes|causes|adds|keeps|lets|allows)\b",
    re.I,
)
CONDITION = re.compile(r"\b(?:if|when|unless|because|whenever)\b", re.I)
# "I tested it and don't like it", "I don't like the skill name.": a reaction to the thing at hand.
REACTION = re.compile(
    r"^i'?d (?:prefer|like|rather) (?:that|this|it|them)\W*$|"
    r"\b(?:don'?t|do not) (?:like|want|need) (?:it|this|that|these|those|them"
    r"|(?:the|this|that|these|those|your|any|either) (?:[\w-]+ ){0,2}[\w-]+)\s*[.!]*$"
    r"|^i'?m (?:\w+ )?leaning (?:towards?|to)\b"  # … a design weighed: "I'm leaning towards a `sync_type` …"
    # … or a verdict on what a run showed: "The gap is a scale difference, not a regression."
    r"|,?\s+not an? (?:regression|bug|problem|issue|error|mistake|leak|flake)\W*$"
    # … or on the turn before: "that's not what I told you to do"; a bug reported: "we're not correctly handling …"
    r"|\bthat'?s not what i (?:told|asked|said|meant|wanted)\b"
    r"|^(?:\w+\W+){0,2}?(?:we'?re|we are|it'?s|it is|you'?re|you are) not (?:properly|correctly) \w+ing\b",
    re.I,
)
# "I told you the two lines belonged to another skill": a correction that reports how things were
# in this task's work, not a wish ("I told you: never mock our code" and "what I said was run …" are).
PAST = re.compile(r"\b(?:was|were|had|did|went|\w{3,}ed)\b", re.I)
WISH = re.compile(r"\b(?:should|must|need|needs|want|wants|always|never|don'?t|do not|use|is|are|am)\b", re.I)
USER_FACT = re.compile(  # "The deploy script is scripts/deploy.sh.", "Our API lives in `api/`."
    r"^(the|our|my|this|that|its)?\s*[\w`'./ -]{1,60}?\s(is|are|lives? in|lives? under|is in|are in|runs on|uses)\s",
    re.I,
)
# "parent on the PR is alex/ent-221": a fact of the work at hand (not "the PR template is …")
OF_THE_WORK = re.compile(  # … and where the work is now ("currently we are working in @docs/prd.md")
    r"\b(?:the|this|that|my|your|our) (?:pr|pull request|branch|ticket)\b(?! (?:template|title|body|desc))"
    r"|\b(?:currently|right now|at the moment)\b|\bwe(?:'re| are) (?:now )?working (?:in|on)\b"
    # … and what the failure at hand is: "this is the classic nspawn dns issue", "that's the same bug as …"
    r"|\b(?:this|that|it)(?:'s| is| was) (?:the|a|an|our|another) (?:[\w-]+ ){0,3}(?:issue|bug|problem|error|failure)\b"
    # … or what the user sees: "this appear in My/applications when try with one user You are not allowed …"
    r"|^(?:this|that|it)\s+(?:appears?|shows?|happens?|says?|throws?|pops? up)\b"
    # … or of the thing on screen, or the agent's work: "That reset is the classic …", "… your loader is fast"
    r"|^(?:this|that|these|those)\s+(?!(?:repo|repository|project|codebase|workspace|package|app)s?\b)[\w-]+"
    r"(?:\s+[\w-]+){0,2}\s+(?:is|are|was|were)\b|\byour\b",
    re.I,
)
# The language the agent answers in: "answer me in Chinese", "Please reply in English", "中文回答我", "请用中文回复"
SAY_IN = re.compile(
    r"(?:please,?\s+)?(?:always\s+)?(?:answer|reply|respond|talk|speak|write)(?:\s+to)?(?:\s+me)?\s+(?:only\s+)?in\s+"
    r"(?:chinese|english|japanese|korean|french|german|spanish|russian|portuguese|italian|dutch|ukrainian)"
    r"(?:\s+please)?\W*$"
    r"|(?:请|請)?(?:用|以|使用)?(?:简体|簡體|繁体|繁體)?(?:中文|英文|日文)(?:来|來)?(?:回答|回复|回覆|答复|答覆|回应|回應|交流)我?\W*$",
    re.I,
)
# A feature's spec, pasted or typed: "Non-functional requirements: - Query plans must …", "Acceptance criteria: …"
SPEC_ITEM = re.compile(
    r"(?:(?:non-)?functional |performance |acceptance |success )?(?:requirements?|criteria|goals?|scope):", re.I
)
# How the user's commits and PRs are written, asked with one ("Write a commit message that doesn't mention
# the assistant", "… without the co-authored-by line"): a standing wish, though said as a task
OF_COMMITS = re.compile(
    r"\b(?:commit|PR|pull request)s?(?: (?:message|description|title|body)s?)? "
    r"(?:(?:that|which) (?:doesn'?t|does not|don'?t|do not|never|won'?t)|without)\b",
    re.I,
)
OBSERVATION = re.compile(  # … or what never (always) happened: "But I never saw the gui open."
    r"\b(don'?t|doesn'?t|does not|do not) (see|show|work|load|sound|appear|seem|look|understand|get|know)\w*\b"
    r"|\b(?:never|always) (?:saw|got|had|did|was|were|heard|found|received|noticed|worked|opened|loaded|showed|"
    r"appeared|happened|came|went)\b",
    re.I,
)
STRONG_CUE = re.compile(
    rf"\b(always|never|don'?t|do not|from now on|every time|whenever|must(?:n'?t)?)\b|{_EACH_TIME}", re.I
)
QUESTION = re.compile(  # "do not commit anything" is an order, not a question
    r"\?\s*$|^(how|what|why|which|where|when|who|can|could|would|is|are|do|does|did|should|will)\b(?!\s+not\b)"
    r"|^(?:can|could|would)(?:you|u)\b",  # typed fast: "canyou review all …"
    re.I,
)
TASK_LEAD = re.compile(  # "ahh ok …", "also …", "just …", "as part of the work, …": as many as lead
    r"^(?:(?:ok(?:ay)?|yes|yeah|yep|yup|no|nope|hmm+|ah+|oh+|great|cool|thanks|please|lets|let's|now|then|also|and|but|so|just"
    r"|as (?:a )?part of (?:the|this) (?:work|task|change|pr|fix|feature))\b[,.!:]?\s*)+",
    re.I,
)


# "dont forget to push the pencil file": a step of this task; "before making changes, dont forget to …" is a rule.
REMINDER = re.compile(r"^(?:and |also |please |oh )*(?:dont|don'?t|do not) forget\b", re.I)
# "add a comment to #91 so we don't forget": the purpose of the task, no order of its own.
PURPOSE = re.compile(r"\bso (?:that )?(?:we|you|it|they|i|nothing) (?:don'?t|do not|won'?t|never)\b[^.;!?]*", re.I)


def is_rule(s: str) -> bool:
    """A standing wish of the user: a rule cue, short, not a question, not a one-off ("for now",
    "this time"), not a proposal or a remark about the work at hand ("I think we should…", "the name
    will cause issues"), not a task instruction unless it says always / never / don't. Said in
    Chinese, its own cues (`chinese`)."""
    if SAY_IN.match(s.strip()):
        return True
    if is_chinese(s):
        return is_chinese_rule(s, MAX_RULE_CHARS)
    if not (12 <= len(s) <= MAX_RULE_CHARS) or is_marker(s) or is_table_row(s) or s.rstrip().endswith(":"):
        return False  # (… or the lead of what follows it: "this: Instead of one branch per commit, …:")
    body = TASK_LEAD.sub("", s)
    body = body if REACH.search(s) else PURPOSE.sub("", body)
    if CORRECTION.search(body) and not body.rstrip().endswith("?") and not ONE_OFF.search(body):
        said = CORRECTION.sub("", body)
        if CODE.search(body):
            return True
        return len(re.findall(r"[A-Za-z]{3,}", said)) >= 6 and not (PAST.search(said) and not WISH.search(said))
    if QUESTION.search(s) or QUESTION.search(body):  # "also can we configure …"
        return False
    if OF_COMMITS.search(body):
        return True
    if SPEC_ITEM.match(body):  # the feature's spec: "Non-functional requirements: - Query plans must …"
        return False
    if ONE_OFF.search(body) or FOR_ONE.search(body) or DEICTIC.match(body) or ELLIPTIC.search(body):
        return False
    if AT_WORK.search(body) or (FINDING.search(body) and not STRONG_CUE.search(body)):
        return False  # a design weighed, a choice handed over, a point of the list on screen, a verdict on it
    if not RULE_CUE.search(body):
        return False
    # an order with its cue first is a rule of the repo: "don't use npm here", "don't mention AI in commits"
    at_hand = AT_HAND.search(body) or ((WORDING.search(body) or HERE.search(body)) and not ORDER.match(body))
    if at_hand and not REACH.search(body):
        return False  # an edit of the text or thing on screen, not a standing wish
    if REMINDER.match(body) and not (CONDITION.search(body) or REACH.search(body) or re.search(r"\bbefore\b", body)):
        return False
    if ((HEDGE.search(body) or TASK_WISH.search(body) or OPINION.match(body)) and not REACH.search(body)) or (
        REACTION.search(body)
    ):
        return False  # a proposal for the work at hand, the task wanted, or a reaction to it
    if REMARK.match(body) and not CONDITION.search(body) and not RULE_CUE.search(REMARK.sub("", body)):
        return False  # what the change at hand would do, no rule
    if EFFECT.match(body) and not STRONG_CUE.search(body):
        return False
    if OBSERVATION.search(body) and not STRONG_CUE.search(OBSERVATION.sub("", body)):
        return False  # "I don't see it in cursor": a report, not a wish
    return not TASK_VERB.match(body) or bool(STRONG_CUE.search(body))


# A pick among the options the agent laid out: "build 1. and 2.", "do 2 and 3", "option B", "(the
# recommendation)", "go with …", answers to its numbered questions ("1 yes ok 4 ok …"). The prompt then
# chooses for this task, and its words are rules only where they say their reach.
CHOICE = re.compile(
    r"\b\d[.)]?\s*(?:and|&|\+|,)\s*\d\b|\b(?:option|approach|variant|alternative|scenario)\s+(?:[A-D]|\d)\b"
    r"|\bthe recommend(?:ation|ed (?:one|option|approach))\b|^(?:ok(?:ay)?,?\s+)?(?:let'?s\s+)?go with\b"
    r"|(?:^|\s)#?\d[.):]?\s+(?:yes|no|ok(?:ay)?|agreed?|sure|fine|skip|yep|nope|correct)\b",  # "1 yes 4 ok …": the answers
    re.I,
)


_NEGATION = re.compile(r"\b(?:not|never|no|don'?t|dont|doesn'?t|won'?t|shouldn'?t|always|only)\b", re.I)


def said_again(rule: str, before: str) -> bool:
    """Does the user's `rule` say again what a rule of theirs `before` said: its words, in order, are
    the other's or a part of them ("commit all and do not add your signature" after "Commit all,
    and do not add your signature to the commit message"), with the same "not", "never", "always"?"""
    a, b = (" ".join(re.findall(r"[\w'$-]+", s.lower())) for s in (rule, before))
    short, long_ = sorted((a, b), key=len)
    if len(short.split()) < 4 or f" {short} " not in f" {long_} ":
        return a == b
    return sorted(_NEGATION.findall(a)) == sorted(_NEGATION.findall(b))


def rule_text(said: list[str], n: int) -> str:
    """The rule the prompt's sentence `said[n]` states, as memory keeps it (`with_context`, clipped
    to RULE_TEXT_CHARS), or "" when it states none (`is_rule`; in a prompt that picks among options,
    `CHOICE`, only one that says its reach). Phase 1 and replay read rules here."""
    if not is_rule(said[n]) or (any(CHOICE.search(x) for x in said) and not REACH.search(said[n])):
        return ""
    return clip(with_context(said, n), RULE_TEXT_CHARS)


def with_context(said: list[str], n: int) -> str:
    """The user's rule `said[n]`, after the sentence before it when the rule needs it to be
    understood (`NEEDS_BEFORE`) and it is short; without its lead ("ok, …")."""
    rule = TASK_LEAD.sub("", said[n])
    before = TASK_LEAD.sub("", said[n - 1]) if n else ""
    if before and len(before) <= MAX_BEFORE_CHARS and NEEDS_BEFORE.match(rule) and not CODE.search(rule):
        return f"{before} {rule}"
    return rule
