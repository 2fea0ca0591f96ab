"""Small shell programs that change the environment and then ``exec`` the task: loading
modules, activating a Python environment. Every name travels as an argument, never as
script text, so a module or folder name cannot become shell code."""

from __future__ import annotations

from hpcflow.errors import HpcflowError
from hpcflow.spec.names import module_problem

#: Loads modules, then runs the rest of its arguments. Arguments: the init file ("" to
#: find one), 1 to purge first, the number of modules, the modules, the command.
MODULES_SCRIPT = r"""init=$1 purge=$2 n=$3
shift 3
if [ -n "$init" ]; then
    . "$init" || { echo "hpcflow: cannot read the modules init file $init" >&2; exit 97; }
elif ! type module >/dev/null 2>&1; then
    for f in "${LMOD_PKG:+$LMOD_PKG/init/bash}" "${MODULESHOME:+$MODULESHOME/init/bash}" \
             /usr/share/lmod/lmod/init/bash /usr/share/modules/init/bash; do
        if [ -n "$f" ] && [ -r "$f" ]; then . "$f"; break; fi
    done
fi
if ! type module >/dev/null 2>&1; then
    echo "hpcflow: no 'module' command on $(hostname): set modules_init in the profile" \
         "to the file that defines it" >&2
    exit 97
fi
if [ "$purge" = 1 ]; then module purge || exit 97; fi
if [ "$n" -gt 0 ]; then
    module load "${@:1:$n}" || { echo "hpcflow: module load ${*:1:$n} failed" >&2; exit 97; }
    shift "$n"
fi
exec "$@"
"""

#: Activates a Python environment (venv or conda prefix, the first argument), then runs
#: the rest of its arguments.
ACTIVATE_SCRIPT = r"""prefix=$1 kind=$2
shift 2
if [ "$kind" = conda ]; then
    CONDA_PREFIX=$prefix; export CONDA_PREFIX
else
    VIRTUAL_ENV=$prefix; export VIRTUAL_ENV
fi
PATH="$prefix/bin:$PATH"; export PATH
unset PYTHONHOME
exec "$@"
"""

#: Exit status of a shim that could not set the environment up.
SETUP_FAILED = 97


def modules_argv(load: list[str], purge: bool, init: str | None) -> list[str]:
    """argv that loads ``load`` (after ``module purge`` when ``purge``) and then runs
    whatever argv follows it. Names are checked again here (the workflow's and profile's
    were when read): Lmod evaluates a name, so one outside the grammar never reaches it."""
    for name in load:
        problem = module_problem(name)
        if problem:
            raise HpcflowError(problem)
    return [
        "bash", "-c", MODULES_SCRIPT, "hpcflow-modules",
        init or "", "1" if purge else "0", str(len(load)), *load,
    ]  # fmt: skip


def activate_argv(prefix: str, kind: str) -> list[str]:
    """argv that activates the venv or conda prefix ``prefix`` (``kind``: venv or conda)
    and then runs whatever argv follows it (with /bin/sh: an image may have no bash)."""
    return ["/bin/sh", "-c", ACTIVATE_SCRIPT, "hpcflow-activate", prefix, kind]
