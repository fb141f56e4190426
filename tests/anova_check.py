#!/usr/bin/env python3
"""Independent ANOVA of a full factorial design, to cross-check linerate's
Rust implementation (crates/measure/src/experiment, test crates/measure/tests/anova.rs).

Method: least squares regression with effect (sum-to-zero) coding, one
column block per factor and per interaction (products of the factors'
columns). The sum of squares of a component is the increase of the residual
sum of squares when its columns are removed from the full model (balanced
design: all orders agree). Effects are the fitted coefficients mapped back
to levels; their standard deviations come from the covariance matrix of the
coefficients (MSE * (X'X)^-1), not from Jain's closed formulas. Quantiles
from scipy.stats.

Usage: anova_check.py INPUT.json   (prints JSON on stdout)
INPUT: {"factors": [{"name": .., "levels": [..]}, ..], "replications": r,
        "values": [...] (cell-major, factor 0 slowest, replications innermost),
        "transform": "none" | "log10"}
Exit 3 (with a message) when numpy or scipy are missing.
"""
import itertools
import json
import sys

try:
    import numpy as np
    from scipy import stats
except ImportError as e:  # the Rust tests require numpy and scipy and fail here
    print(f"anova_check: {e}", file=sys.stderr)
    sys.exit(3)


def coding(n_levels):
    """Effect coding: n x (n-1) matrix; level j<n-1 -> unit vector j, last -> all -1."""
    c = np.zeros((n_levels, n_levels - 1))
    for j in range(n_levels - 1):
        c[j, j] = 1.0
    c[n_levels - 1, :] = -1.0
    return c


def main():
    spec = json.load(open(sys.argv[1]))
    factors = spec["factors"]
    r = spec["replications"]
    y = np.array(spec["values"], dtype=float)
    if spec.get("transform", "none") == "log10":
        y = np.log10(y)
    sizes = [len(f["levels"]) for f in factors]
    k = len(sizes)
    cells = list(itertools.product(*[range(n) for n in sizes]))  # factor 0 slowest
    rows = [c for c in cells for _ in range(r)]
    n = len(rows)
    assert n == len(y)
    codes = [coding(s) for s in sizes]

    subsets = [s for order in range(1, k + 1) for s in itertools.combinations(range(k), order)]

    def block(subset, levels):
        """Row of the design-matrix block of `subset` for one observation."""
        v = np.ones(1)
        for f in subset:
            v = np.kron(v, codes[f][levels[f]])
        return v

    blocks = {s: np.array([block(s, lv) for lv in rows]) for s in subsets}
    intercept = np.ones((n, 1))

    def rss(skip=None):
        cols = [intercept] + [blocks[s] for s in subsets if s != skip]
        x = np.hstack(cols)
        beta, *_ = np.linalg.lstsq(x, y, rcond=None)
        res = y - x @ beta
        return float(res @ res), x, beta

    rss_full, x_full, beta = rss()
    mean = float(np.mean(y))
    sst = float(np.sum((y - mean) ** 2))
    dfe = len(cells) * (r - 1)
    mse = rss_full / dfe if dfe > 0 else None

    comps = []
    effects = {}
    cov = None
    if mse is not None:
        cov = mse * np.linalg.pinv(x_full.T @ x_full)
    offset = 1
    for s in subsets:
        name = " x ".join(factors[f]["name"] for f in s)
        ss = rss(skip=s)[0] - rss_full
        df = int(np.prod([sizes[f] - 1 for f in s]))
        ms = ss / df
        comp = {"name": name, "ss": ss, "df": df, "ms": ms, "pct": ss / sst * 100.0}
        if mse is not None and mse > 0:
            comp["f"] = ms / mse
            comp["f90"] = float(stats.f.ppf(0.90, df, dfe))
            comp["f95"] = float(stats.f.ppf(0.95, df, dfe))
            comp["p"] = float(stats.f.sf(ms / mse, df, dfe))
        comps.append(comp)
        width = blocks[s].shape[1]
        b = beta[offset:offset + width]
        vals, sds = [], []
        for lv in itertools.product(*[range(sizes[f]) for f in s]):
            full = [0] * k
            for f, l in zip(s, lv):
                full[f] = l
            c = block(s, full)
            vals.append(float(c @ b))
            if cov is not None:
                cc = np.zeros(x_full.shape[1])
                cc[offset:offset + width] = c
                sds.append(float(np.sqrt(cc @ cov @ cc)))
        effects[name] = {"values": vals, "sd": sds}
        offset += width

    out = {
        "mean": float(beta[0]),
        "ssy": float(y @ y),
        "ss0": n * mean * mean,
        "sst": sst,
        "components": comps,
        "effects": effects,
    }
    if mse is not None:
        out["error"] = {"ss": rss_full, "df": dfe, "ms": mse, "pct": rss_full / sst * 100.0}
        out["t90"] = float(stats.t.ppf(0.95, dfe))
        out["t95"] = float(stats.t.ppf(0.975, dfe))
        out["mean_sd"] = float(np.sqrt(cov[0, 0]))
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
