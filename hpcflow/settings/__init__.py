"""Site profiles and layered settings, with where each value came from.

A :class:`Profile` says where a run's allocations go and how they are shaped.
:func:`resolve_profile` builds one from its layers (built-in defaults < profile file <
workflow defaults < ``HPCFLOW_*`` environment < command line) and returns it with the
source of every value; :func:`find_profile` finds profile files by name or path.
"""

from hpcflow.settings.lookup import (
    ProfileRef,
    default_profile_name,
    find_profile,
    list_profiles,
    search_dirs,
    user_profile_dir,
)
from hpcflow.settings.profile import Profile, field_kind
from hpcflow.settings.resolve import (
    BUILTIN_DEFAULT,
    Layer,
    ResolvedProfile,
    env_var,
    environment_layer,
    load_profile,
    merge_layers,
    override_layer,
    profile_layer,
    resolve_profile,
    workflow_layer,
)

__all__ = [
    "BUILTIN_DEFAULT",
    "Layer",
    "Profile",
    "ProfileRef",
    "ResolvedProfile",
    "default_profile_name",
    "env_var",
    "environment_layer",
    "field_kind",
    "find_profile",
    "list_profiles",
    "load_profile",
    "merge_layers",
    "override_layer",
    "profile_layer",
    "resolve_profile",
    "search_dirs",
    "user_profile_dir",
    "workflow_layer",
]
