"""jurybox.serving."""
