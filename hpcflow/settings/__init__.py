"""Site profiles and layered settings, with where each value came from.

A :class:`Profile` says where a run's allocations go and how they are shaped.
:func:`resolve_profile` builds one from its layers (built-in defaults < profile file <
workflow defaults < ``HPCFLOW_*`` environment < command line) and returns it with the
source of every value; :func:`find_profile` finds profile files by name or path.

The names below are imported when first used: :mod:`hpcflow.settings.lookup` loads
without pydantic and the profile model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hpcflow._lazy import lazy_names

if TYPE_CHECKING:
    from hpcflow.settings.lookup import ProfileRef as ProfileRef
    from hpcflow.settings.lookup import default_profile_name as default_profile_name
    from hpcflow.settings.lookup import find_profile as find_profile
    from hpcflow.settings.lookup import list_profiles as list_profiles
    from hpcflow.settings.lookup import search_dirs as search_dirs
    from hpcflow.settings.lookup import user_profile_dir as user_profile_dir
    from hpcflow.settings.profile import Profile as Profile
    from hpcflow.settings.profile import field_kind as field_kind
    from hpcflow.settings.resolve import BUILTIN_DEFAULT as BUILTIN_DEFAULT
    from hpcflow.settings.resolve import Layer as Layer
    from hpcflow.settings.resolve import ResolvedProfile as ResolvedProfile
    from hpcflow.settings.resolve import env_var as env_var
    from hpcflow.settings.resolve import environment_layer as environment_layer
    from hpcflow.settings.resolve import load_profile as load_profile
    from hpcflow.settings.resolve import merge_layers as merge_layers
    from hpcflow.settings.resolve import override_layer as override_layer
    from hpcflow.settings.resolve import profile_layer as profile_layer
    from hpcflow.settings.resolve import resolve_profile as resolve_profile
    from hpcflow.settings.resolve import workflow_layer as workflow_layer

#: The package's names, by the module that defines each.
_NAMES = {
    "ProfileRef": "lookup",
    "default_profile_name": "lookup",
    "find_profile": "lookup",
    "list_profiles": "lookup",
    "search_dirs": "lookup",
    "user_profile_dir": "lookup",
    "Profile": "profile",
    "field_kind": "profile",
    "BUILTIN_DEFAULT": "resolve",
    "Layer": "resolve",
    "ResolvedProfile": "resolve",
    "env_var": "resolve",
    "environment_layer": "resolve",
    "load_profile": "resolve",
    "merge_layers": "resolve",
    "override_layer": "resolve",
    "profile_layer": "resolve",
    "resolve_profile": "resolve",
    "workflow_layer": "resolve",
}

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


__getattr__ = lazy_names(__name__, _NAMES)
