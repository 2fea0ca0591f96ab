"""The modes a run can take: local, pilot, jobs and elastic.

Each mode is a thin composition of the engine (hpcflow.engine) and a backend
(hpcflow.backends): where the workers come from, and who follows the run.
"""
