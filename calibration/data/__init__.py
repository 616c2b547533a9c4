"""Human labels and judges' verdicts as data, and their join per criterion.

The labels file format and its reader (:mod:`.labels`), the labelling page's append-only file
(:mod:`.label_store`), judged files (:mod:`.verdicts`), and the join of the two per criterion
(:mod:`.joined`). Imports only the statistics room and jurybox.rubrics.
"""
