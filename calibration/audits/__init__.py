"""Audits and comparisons: judges' biases, win rates and ratings, length-controlled scores.

Judges' length, dependence and self-preference (:mod:`.audit`), win rates, Bradley-Terry
ratings and position bias (:mod:`.preference`), and length-controlled scores
(:mod:`.length_control`).
"""
