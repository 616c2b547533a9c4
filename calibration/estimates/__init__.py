"""Estimates from few labels: PPI++ means, active labels, thresholds, simulations.

Prediction-powered means (:mod:`.ppi`), labels chosen actively and the weighted estimate that
stays unbiased under that choice (:mod:`.active`), which item the labelling page offers next
(:mod:`.selection`), a cascade's threshold with a guarantee (:mod:`.cascade_threshold`), and the
simulations the tests and perf scripts check them with (:mod:`.synthetic`).
"""
