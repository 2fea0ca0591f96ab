"""Parsing of human-written quantities: durations (``90s``, ``1:30:00``) and memory (``4GB``)."""

from __future__ import annotations

import math
import re

_DURATION_UNITS = {"s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "hr": 3600, "d": 86400}
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)\s*(hr|h|min|m|sec|s|d)", re.IGNORECASE)
_MEMORY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgtp]?)(i?b?)\s*$", re.IGNORECASE)
_MEMORY_POWERS = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4, "p": 5}


def parse_duration(value: object) -> float:
    """Seconds from ``30``, ``"45s"``, ``"10m"``, ``"1h30m"``, ``"2:00:00"`` or ``"1-12:00:00"``.

    Raises ``ValueError`` with a message that shows accepted forms.
    """
    if isinstance(value, bool):
        raise ValueError("expected a duration such as 30, '90s', '10m', '1h30m' or '2:00:00'")
    if isinstance(value, int | float):
        if value < 0:
            raise ValueError("a duration cannot be negative")
        return _finite(value, "a duration")
    if not isinstance(value, str):
        raise ValueError("expected a duration such as 30, '90s', '10m', '1h30m' or '2:00:00'")
    text = value.strip()
    days = 0
    if re.fullmatch(r"\d+-\d{1,2}(:\d{1,2}){0,2}", text):
        day_text, text = text.split("-", 1)
        days = int(day_text)
    if re.fullmatch(r"\d+(:\d{1,2}){1,2}", text):
        parts = [int(p) for p in text.split(":")]
        while len(parts) < 3:
            parts.insert(0, 0)
        hours, minutes, seconds = parts
        return _finite(days * 86400 + hours * 3600 + minutes * 60 + seconds, "a duration")
    if re.fullmatch(r"\d+(\.\d+)?", text):
        return _finite(float(text) + days * 86400, "a duration")
    matches = list(_DURATION_PART.finditer(text))
    if matches and "".join(m.group(0) for m in matches).replace(" ", "") == text.replace(" ", ""):
        total = sum(float(m.group(1)) * _DURATION_UNITS[m.group(2).lower()] for m in matches)
        return _finite(total + days * 86400, "a duration")
    raise ValueError(
        f"cannot read {value!r} as a duration; use e.g. 30, '90s', '10m', '1h30m' or '2:00:00'"
    )


def parse_memory(value: object) -> int:
    """Bytes from ``"512MB"``, ``"4G"``, ``"2GiB"`` or a bare number of megabytes."""
    if isinstance(value, bool):
        raise ValueError("expected memory such as '512MB' or '4GB'")
    if isinstance(value, int | float):
        if value < 0:
            raise ValueError("memory cannot be negative")
        return _bytes(_finite(value, "memory") * 1024**2)
    if not isinstance(value, str):
        raise ValueError("expected memory such as '512MB' or '4GB'")
    match = _MEMORY.match(value)
    if not match:
        raise ValueError(f"cannot read {value!r} as memory; use e.g. '512MB', '4GB' or '2GiB'")
    number, prefix, suffix = match.groups()
    if not prefix:
        if suffix.lower() == "b":
            return _bytes(float(number))  # "512B": bytes
        if suffix:
            raise ValueError(f"cannot read {value!r} as memory; use e.g. '512MB', '4GB' or '2GiB'")
        # A bare number means megabytes, as in SLURM's --mem.
        return _bytes(float(number) * 1024**2)
    return _bytes(float(number) * 1024 ** _MEMORY_POWERS[prefix.lower()])


def _bytes(amount: float) -> int:
    if not math.isfinite(amount) or amount >= 2**63:
        raise ValueError("memory is too large")
    return int(amount)


def _finite(value: float, what: str) -> float:
    """``value`` as a finite float, or a ValueError naming ``what``."""
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise ValueError(f"{what} must be a finite number (not too large, not inf or nan)")
    return number


def format_duration(seconds: float) -> str:
    """``5400`` → ``"1:30:00"`` (SLURM's H:MM:SS)."""
    total = int(round(seconds))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}"


def format_elapsed(seconds: float) -> str:
    """A run's wall time for people: ``"320 ms"``, ``"4.2s"``, ``"12m 05s"``, ``"2h 03m"``."""
    # Rounded before the unit is chosen: 0.9996 s is "1.0s", not "1000 ms".
    if round(seconds * 1000) < 1000:
        return f"{max(seconds, 0.0) * 1000:.0f} ms"
    if round(seconds, 1) < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(round(seconds)), 60)
    if minutes < 60:
        return f"{minutes}m {secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m"


def format_memory(num_bytes: int) -> str:
    """Bytes → a short human string (``1.5 GiB``)."""
    size = float(num_bytes)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"
