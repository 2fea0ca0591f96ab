"""Grammars of the names hpcflow hands to other tools: environment modules and container
images. A name is checked when the workflow or profile is read, before ``module``, Lmod,
Apptainer, Charliecloud or Podman sees it: Lmod evaluates a module name given as an
argument (``x'; touch CANARY; '`` runs a command), and a runtime takes an image that
starts with ``-`` as an option.
"""

from __future__ import annotations

import re

#: A module name: path components of letters, digits, ``_ . + -`` (``gcc/12.2.0``,
#: ``py-numpy/1.26-foss-2023a``), not starting with ``-``.
MODULE_NAME = re.compile(r"[A-Za-z0-9_.+][A-Za-z0-9_.+-]*(?:/[A-Za-z0-9_.+-]+)*")

# The OCI / Docker reference grammar (github.com/distribution/reference, grammar.go).
_ALNUM = r"[a-z0-9]+"
_SEPARATOR = r"(?:[._]|__|-+)"
_PATH_COMPONENT = rf"{_ALNUM}(?:{_SEPARATOR}{_ALNUM})*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[0-9a-fA-F:]+\])(?::[0-9]+)?"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
_NAME = rf"(?:{_DOMAIN}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*"
#: An image reference: ``[registry[:port]/]path[:tag][@digest]``.
OCI_REFERENCE = re.compile(rf"{_NAME}(?::{_TAG})?(?:@{_DIGEST})?")
#: Schemes Apptainer/Singularity pull from.
SCHEMES = ("docker", "oras", "library", "shub")
#: Bytes no file name handed to a tool should hold.
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def module_problem(name: str) -> str | None:
    """Why ``name`` is not a module name (None: it is one)."""
    if MODULE_NAME.fullmatch(name):
        return None
    return (
        f"{name!r} is not a module name: letters, digits, '_', '.', '+' and '-' in "
        "'/'-separated parts (e.g. gcc/12.2.0), not starting with '-'"
    )


def image_problem(image: str) -> str | None:
    """Why ``image`` is neither an image reference nor a path (None: it is one)."""
    scheme, sep, rest = image.partition("://")
    if sep:
        if scheme not in SCHEMES:
            return f"{image!r}: unknown image scheme {scheme!r}; use one of " + ", ".join(
                f"{s}://" for s in SCHEMES
            )
        if not OCI_REFERENCE.fullmatch(rest):
            return (
                f"{image!r} is not an image reference: [registry/]name[:tag][@digest], the "
                "name in lower case (e.g. docker://docker.io/library/ubuntu:22.04)"
            )
        return None
    if OCI_REFERENCE.fullmatch(image):
        return None
    if image.startswith("-") or _CONTROL.search(image):
        return (
            f"{image!r} is neither an image reference ([registry/]name[:tag][@digest]) nor a "
            "path (a path may not start with '-' nor hold control characters)"
        )
    return None  # a path to an image file or folder (relative: from the workflow's folder)
