"""Audits and comparisons: judges' biases, win rates and ratings, length-controlled scores.

Judges' length, dependence and self-preference (`.audit`), win rates, Bradley-Terry
ratings and position bias (`.preference`), and length-controlled scores
(`.length_control`).
"""
