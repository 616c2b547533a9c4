"""jurybox.serving.runs: bulk runs over prediction files: reading rows, the results store and its
manifest, the summary, ``--estimate``; the local engine (``local``) and the Ray Data engine (``ray``)
drive one run each their own way, and fitting a cascade from a run's verdicts."""
