"""Synthetic points drawn from known shape-aware laws, for the fit, selection and prescription tests.

The Liu et al. 2026 form with exponents near what they fit on the Chinchilla models (width and depth
near 1, tokens 0.3) and Chinchilla-sized coefficients for D; the aspect form with its floor at d/L = 20.
Widths 64-512, depths 2-16, tokens 3e7-3e9 (48 configurations), N = 12 l w^2 (Kaplan et al. 2020).
"""

from __future__ import annotations

import math

import numpy as np

from depthwidth.report.fit_shape import LawPoint

LIU = {"E": 1.8, "c_w": 60.0, "a_w": 0.9, "c_l": 1.5, "a_l": 1.0, "c_D": 400.0, "a_D": 0.3}
ASPECT = {"E": 1.7, "A": 400.0, "alpha": 0.34, "B": 410.0, "beta": 0.28, "G": 0.02, "r0": 20.0}
WIDTHS = (64, 128, 256, 512)
DEPTHS = (2, 4, 8, 16)
TOKENS = (3e7, 3e8, 3e9)


def liu_loss(width: float, depth: float, tokens: float, law: dict = LIU) -> float:
    return (law["E"] + law["c_w"] / width ** law["a_w"] + law["c_l"] / depth ** law["a_l"]
            + law["c_D"] / tokens ** law["a_D"])


def aspect_loss(width: float, depth: float, tokens: float, params: float, law: dict = ASPECT) -> float:
    base = law["E"] + law["A"] / params ** law["alpha"] + law["B"] / tokens ** law["beta"]
    return base * (1 + law["G"] * math.log(width / depth / law["r0"]) ** 2)


def draw(*, seed: int, sigma: float = 0.005, form: str = "liu", seeds: int = 1, widths=WIDTHS, depths=DEPTHS,
         tokens=TOKENS) -> list[LawPoint]:
    """One draw: every (width, depth, tokens) with multiplicative log-normal noise `sigma`, `seeds` each."""
    rng = np.random.default_rng(seed)
    out = []
    for w in widths:
        for l in depths:
            for d in tokens:
                n = 12 * l * w * w
                truth = liu_loss(w, l, d) if form == "liu" else aspect_loss(w, l, d, n)
                for s in range(seeds):
                    out.append(LawPoint(width=w, depth=l, tokens=d, params=n, seed=s,
                                        loss=truth * math.exp(rng.normal(0.0, sigma))))
    return out
