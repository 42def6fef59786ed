"""dsh-memory: long-term memory for coding agents.

Nothing happens at import time: no network, no files, no environment reads.
"""

__version__ = "0.1.0"
