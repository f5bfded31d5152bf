"""Presentation: how depthwidth's results look in a terminal and in the plan plot.

Every module renders a typed result (or its `to_dict()`, so stored JSON renders the same way) and
computes nothing. `units` writes every quantity (counts, bytes, FLOPs, rates, durations); `terminal`
gives the console; the others hold the rich tables of one command each (`calc`, `plan` with
`compare`, `bench`, `hw`, `train`, `study`, `probe`), the live progress displays (`progress`) and the
plan's trade-off picture (`plan_plot`, matplotlib imported only when it draws).

Layering: this package sits above `shapes/`, `train/`, `bench/` and `study/` and below `report/` and
`cli/`; it never imports those two. Importing it is cheap (no torch, numpy or matplotlib).
"""
