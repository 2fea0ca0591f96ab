"""Elastic mode's dask-jobqueue cluster: started, watched for failed submissions, closed.

Everything that knows dask-jobqueue's quirks is here (see each function): its SIGINT
handler installed at import, jobs that failed to submit and are never retried, and the
tracebacks it logs for them.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from hpcflow.modes.elastic_plan import ElasticPlan
from hpcflow.modes.elastic_watch import SubmitFailures

if TYPE_CHECKING:
    from dask_jobqueue.core import JobQueueCluster
    from distributed import Security

log = logging.getLogger(__name__)

#: Builds the jobqueue cluster (tests may inject their own); see :func:`start_cluster`.
ClusterFactory = Callable[[ElasticPlan, "Security | None", SubmitFailures], "JobQueueCluster"]


def start_cluster(
    plan: ElasticPlan, security: Security | None, failures: SubmitFailures
) -> JobQueueCluster:
    """The dask-jobqueue cluster for ``plan``: its scheduler starts in this process.

    Every worker job's submission is counted in ``failures``.
    """
    dask_jobqueue = import_jobqueue()
    cls = getattr(dask_jobqueue, plan.cluster_class)
    kwargs: dict[str, Any] = dict(plan.kwargs)
    if security is not None:
        kwargs["security"] = security
    kwargs["job_cls"] = _counting_job_class(cls.job_cls, failures)
    cluster: JobQueueCluster = cls(**kwargs)
    return cluster


def import_jobqueue() -> Any:
    """``import dask_jobqueue``, keeping our Ctrl-C handling.

    dask-jobqueue 0.9 installs a SIGINT handler that calls ``sys.exit()`` when it is
    imported (``dask_jobqueue/runner.py``): Ctrl-C would then skip the driver's cancel
    path. Put back whatever handler was there.
    """
    previous = signal.getsignal(signal.SIGINT)
    import dask_jobqueue

    if threading.current_thread() is threading.main_thread() and previous is not None:
        signal.signal(signal.SIGINT, previous)
    return dask_jobqueue


def _counting_job_class(base: type[Any], failures: SubmitFailures) -> type[Any]:
    """``base`` (dask-jobqueue's job class) reporting each submission to ``failures``."""
    from distributed.core import Status

    class CountingJob(base):  # type: ignore[misc, valid-type]
        async def start(self) -> None:
            try:
                await super().start()
            except Exception as exc:
                failures.failed(exc)
                exc.hpcflow_counted = True  # type: ignore[attr-defined]
                # dask-jobqueue leaves it "created", and closing the cluster then fails
                # an assertion and waits for the interpreter's exit to try again.
                self.status = Status.failed
                raise
            failures.succeeded()

    return CountingJob


class _CountedFailures(logging.Filter):
    """Drops Dask's and Tornado's tracebacks of a submission already reported in one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not getattr(exc, "hpcflow_counted", False)


#: Loggers that repeat a failed submission with its traceback.
_NOISY_LOGGERS = ("tornado.application", "distributed.deploy.adaptive", "asyncio")


@contextlib.contextmanager
def counted_failures_quiet() -> Iterator[None]:
    """While inside, failed submissions are logged once (by :class:`SubmitFailures`)."""
    quiet = _CountedFailures()
    for name in _NOISY_LOGGERS:
        logging.getLogger(name).addFilter(quiet)
    try:
        yield
    finally:
        for name in _NOISY_LOGGERS:
            logging.getLogger(name).removeFilter(quiet)


def close_cluster(cluster: JobQueueCluster, client: Any) -> None:
    """Close the client, then the cluster (dask-jobqueue cancels its jobs)."""
    if client is not None:
        try:
            client.close()
        except Exception as exc:  # the cluster's own close still cancels the jobs
            log.warning("closing the elastic client: %s", exc)
    try:
        cluster.close()
    except Exception as exc:  # e.g. a job that never started; leftovers are checked next
        log.info("closing the elastic cluster: %r", exc)


def cluster_job_ids(cluster: JobQueueCluster) -> set[str]:
    """Native ids of the worker jobs the cluster still knows."""
    ids = set()
    for job in list(cluster.workers.values()):
        job_id = getattr(job, "job_id", None)
        if job_id:
            ids.add(str(job_id))
    return ids
