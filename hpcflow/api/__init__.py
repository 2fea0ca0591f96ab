"""hpcflow's Python API: build a workflow in code, check it, run it, read its runs.

``launch.py`` is what ``hpcflow run`` does (the command line is written on it);
``locate.py`` and ``logs.py`` find runs and their tasks' logs for the commands that read
runs.
"""
