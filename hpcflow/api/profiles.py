"""Site profiles for front ends (``hpcflow profiles``): the profiles on the search path,
one loaded, one resolved from its layers with the source of every value, and how a
setting's value is written (the functions of :mod:`hpcflow.settings`)."""

from hpcflow.settings import (
    BUILTIN_DEFAULT,
    ResolvedProfile,
    field_kind,
    list_profiles,
    load_profile,
    resolve_profile,
)

__all__ = [
    "BUILTIN_DEFAULT",
    "ResolvedProfile",
    "field_kind",
    "list_profiles",
    "load_profile",
    "resolve_profile",
]
