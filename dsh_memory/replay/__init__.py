"""`dsh-memory replay`: would memory have helped? (docs/cli.md). `core.replay()` is the one core
function (the CLI and the bench call it) and rebuilds the memory at each session's start;
rules.py: the standing instructions of a session and when two say the same; result.py: what it
found."""
