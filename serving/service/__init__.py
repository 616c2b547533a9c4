"""jurybox.serving.service: the scoring service.

Its HTTP protocol and errors, configuration and limits, admission of requests, the Ray Serve
deployments and ingress, the builder, and the Python client.
"""
