"""`dsh-memory replay`: would memory have helped? The user's own history replayed through the real
pipeline in a temporary memory root, counting the standing instructions the user had to say again
and whether the memory injected at that session's start already held them (issue 29).

core.py: `replay()`, the one core function (the CLI and the bench call it); rules.py: the
standing instructions of a session and when two say the same; result.py: what it found, and the
last replay kept for the vault."""
