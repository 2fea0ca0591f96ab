"""A package's names imported when first used (PEP 562): importing one light module of
the package (``hpcflow.spec.units``, ``hpcflow.settings.lookup``) then imports none of its
heavy ones (pydantic and the models), which a resume with nothing to run never needs."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_names(package: str, where: Mapping[str, str]) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package``: each name in ``where`` comes from the
    submodule ``where`` names, imported when the name is first used, then kept in the
    package; any other name is an :class:`AttributeError`."""

    def getattr_(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        setattr(sys.modules[package], name, value)
        return value

    return getattr_
