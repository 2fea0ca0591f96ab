"""The pilot rank in every log line of a bootstrap process (``rank-0``, ``rank-head``...):
the allocation's stderr log interleaves all of them."""

from __future__ import annotations

import logging


def tag_logs(rank: int | str) -> None:
    """Give every log record of this process a ``rank`` attribute (the format's ``%(rank)s``)."""
    old_factory = logging.getLogRecordFactory()

    def factory(*args, **kwargs):  # type: ignore[no-untyped-def]
        record = old_factory(*args, **kwargs)
        record.rank = rank
        return record

    logging.setLogRecordFactory(factory)
