"""Audits and comparisons: judges' length, dependence and self-preference (:mod:`.audit`),
win rates, Bradley-Terry ratings and position bias (:mod:`.preference`), and length-controlled
scores (:mod:`.length_control`)."""
