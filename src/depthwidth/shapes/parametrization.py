"""How a run's initialisation, learning rates and forward multipliers scale with width and depth.

`PARAMETRIZATIONS` names the supported schemes: "sp" (standard parametrization, what the trainer has
always done), "mup" (width only: Yang et al. 2022, arXiv 2203.03466), "completep" (width and depth with
alpha = 1: Dey et al. 2025, arXiv 2505.01618) and "depth-mup" (width and depth with alpha = 1/2: Yang
et al. 2023, arXiv 2310.02244; Bordelon et al. 2023, arXiv 2309.16620). Pure: no torch.
"""

from __future__ import annotations

PARAMETRIZATIONS = ("sp", "mup", "completep", "depth-mup")
