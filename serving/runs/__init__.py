"""Bulk runs over prediction files, on the local engine or the Ray Data engine.

``jurybox.serving.runs`` holds reading rows, the results store and its manifest, the summary,
``--estimate``; the local engine (``local``) and the Ray Data engine (``ray``) drive one run
each their own way; and fitting a cascade from a run's verdicts.
"""
