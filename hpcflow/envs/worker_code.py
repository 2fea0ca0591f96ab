"""hpcflow's own code for a python task's process in another environment: a container or
a venv has its own interpreter, which imports ``hpcflow.worker.pycall`` from a zip of the
package in the run directory (every container mounts that folder). Only the standard
library is needed there: the worker side of hpcflow keeps to it."""

from __future__ import annotations

import io
import os
import zipfile
from pathlib import Path

import hpcflow._version as _version
from hpcflow.store.atomic import write_bytes_atomic

#: Where the package's source lives (the folder holding ``hpcflow/``).
_SOURCE = Path(_version.__file__).resolve().parent


def ensure_worker_code(target: Path) -> str:
    """Write the zip to ``target`` unless it is there; its path (for ``PYTHONPATH``)."""
    if not target.exists():
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
            for folder, dirs, files in os.walk(_SOURCE):
                dirs[:] = sorted(d for d in dirs if d != "__pycache__")
                for name in sorted(files):
                    if name.endswith(".py"):
                        path = Path(folder) / name
                        archive.write(path, Path("hpcflow") / path.relative_to(_SOURCE))
        write_bytes_atomic(target, buffer.getvalue())
    return str(target)
