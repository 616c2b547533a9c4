"""Estimates from few labels: PPI++ means, active labels, thresholds, simulations.

Prediction-powered means (`.ppi`), labels chosen actively and the weighted estimate that
stays unbiased under that choice (`.active`), which item the labelling page offers next
(`.selection`), a cascade's threshold with a guarantee (`.cascade_threshold`), and the
simulations the tests and perf scripts check them with (`.synthetic`).
"""
