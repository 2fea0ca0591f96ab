"""``hpcflow report RUN``: one self-contained HTML file about a run.

``data`` reads the run directory into plain records, ``layout`` places the DAG and the
timeline (pure functions), ``html`` renders them; nothing here touches the network.
"""
