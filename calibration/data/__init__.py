"""Human labels and judges' verdicts as data, and their join per criterion.

The labels file format and its reader (`.labels`), the labelling page's append-only file
(`.label_store`), judged files (`.verdicts`), and the join of the two per criterion
(`.joined`). Imports only the statistics room and jurybox.rubrics.
"""
