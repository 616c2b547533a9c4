"""The labelling page (``jurybox label``): a local web app over judged items that writes the
human labels file ``agree`` and ``calibrate`` read. :mod:`.app` is the session and its HTTP API;
``page.html`` the page."""
