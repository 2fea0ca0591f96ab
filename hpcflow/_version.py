"""The package's version (the bottom of the layers: every package may read it)."""

__version__ = "0.1.0"
