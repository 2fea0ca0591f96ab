"""The command line: one module per command; the only package that writes to the console."""
