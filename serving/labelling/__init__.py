"""The labelling page (``jurybox label``): a local web app for labelling judged items.

It writes the human labels file ``agree`` and ``calibrate`` read. `.app` is the session and
its HTTP API; ``page.html`` the page.
"""
