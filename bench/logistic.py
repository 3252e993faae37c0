"""The logistic regression that bench/ trains the shipped models with (supersedes, facts)."""

from __future__ import annotations

import numpy as np


def fit_logistic(
    x: np.ndarray, y: np.ndarray, l2: float, min_scale: float = 1e-9
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """L2-regularised logistic regression on standardised features, by Newton's method
    (deterministic: no random start, no sampling): (mean, scale, weights, bias). A feature whose
    spread is under `min_scale` is left unscaled (standardising it would blow up its noise)."""
    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale[scale < min_scale] = 1.0
    z = np.hstack([(x - mean) / scale, np.ones((len(x), 1))])
    w = np.zeros(z.shape[1])
    penalty = np.full(z.shape[1], l2)
    penalty[-1] = 0.0  # the bias is not shrunk
    for _ in range(50):
        p = 1.0 / (1.0 + np.exp(-(z @ w)))
        gradient = z.T @ (p - y) + penalty * w
        hessian = (z * (p * (1 - p))[:, None]).T @ z + np.diag(penalty)
        step = np.linalg.solve(hessian, gradient)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return mean, scale, w[:-1], float(w[-1])
