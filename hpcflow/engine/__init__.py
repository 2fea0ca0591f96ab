"""The engine: one run's life cycle, whatever the mode.

Loading and the resume decision, the run directory and its state, the driver that hands
ready tasks to workers, the one ledger of outcomes (state, memo, retries, skips of
dependents), task calls and their fingerprints, and the cost estimate.
"""
