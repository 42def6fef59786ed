"""dsh-memory: long-term memory for coding agents.

Nothing happens at import time: no network, no environment reads, no files written.

The Prefect-facing stages import as `dsh_memory.flows`, `dsh_memory.tasks` and
`dsh_memory.blocks` everywhere. The wheel ships them inside this package (hatch
`force-include`), so an install adds nothing but `dsh_memory` to site-packages. A source
checkout keeps them at the repository's top level (`flows/`, `tasks/`, `blocks/`, next to
`prefect.yaml`), and this package's search path is extended to that top level so the same
import names work there too.
"""

from pathlib import Path as _Path

__version__ = "0.1.0"

_here = _Path(__file__).resolve().parent
if not (_here / "flows").is_dir() and (_here.parent / "prefect.yaml").is_file():
    __path__.append(str(_here.parent))  # noqa: F821 (a package's __path__)
del _Path, _here
