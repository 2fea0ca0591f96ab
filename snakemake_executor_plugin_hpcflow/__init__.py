"""Snakemake executor plugin: ``snakemake --executor hpcflow`` runs Snakemake jobs in hpcflow.

Snakemake finds this package by its name (``snakemake_executor_plugin_<name>``) and reads
three attributes: ``common_settings`` (how Snakemake prepares job commands),
``ExecutorSettings`` (the ``--hpcflow-...`` flags) and ``Executor``. Written against
snakemake-interface-executor-plugins 9.x (``>=9.4,<10``).
"""

from snakemake_executor_plugin_hpcflow.executor import Executor
from snakemake_executor_plugin_hpcflow.settings import ExecutorSettings, common_settings

__all__ = ["Executor", "ExecutorSettings", "common_settings"]
