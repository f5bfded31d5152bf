"""Does a model use its depth: drop-a-layer, block influence, logit lens, update ratios, effective depth."""
