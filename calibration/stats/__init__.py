"""The statistics: agreement, the bootstrap, Dawid-Skene, and the value they all return.

Agreement is Krippendorff's alpha, kappas, correlations, exact and adjacent agreement; the
bootstrap is the one every interval comes from; `.stat.Stat` is the value every
statistic returns. Pure numpy/scipy: imports nothing of jurybox but the error family
(``jurybox.calibration.errors``).
"""
