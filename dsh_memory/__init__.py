"""dsh-memory: long-term memory for coding agents. Importing it reads no environment, touches
no network and writes no file.

`dsh_memory.flows`, `.tasks` and `.blocks`: the wheel ships them inside this package (hatch
`force-include`); a source checkout keeps them at the top level next to `prefect.yaml`, so there
this package's search path is extended to that top level.
"""

from pathlib import Path as _Path

__version__ = "0.1.0"

_here = _Path(__file__).resolve().parent
if not (_here / "flows").is_dir() and (_here.parent / "prefect.yaml").is_file():
    __path__.append(str(_here.parent))  # noqa: F821 (a package's __path__)
del _Path, _here
