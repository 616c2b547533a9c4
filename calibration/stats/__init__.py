"""The statistics: agreement (Krippendorff's alpha, kappas, correlations, exact and adjacent
agreement), the bootstrap every interval comes from, Dawid-Skene, and :class:`.stat.Stat`, the
value every statistic returns. Pure numpy/scipy: imports nothing of jurybox but the error
family (``jurybox.calibration.errors``)."""
