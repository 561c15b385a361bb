"""Paired significance of a difference between two engines over the same queries.

``paired_test(a, b)`` compares per-query scores (e.g. reciprocal rank @10) of two engines on
the same queries: the mean difference, a two-sided p-value from a paired randomization test
(Fisher's sign-flip test, as IR evaluation uses it: under the null hypothesis that the
engines are exchangeable, each query's difference is as likely positive as negative; the
p-value is the share of random sign assignments whose mean difference is at least as far
from 0 as the observed one), and a 95% bootstrap confidence interval of the mean difference
(queries resampled with replacement). Both use a fixed seed, so a run is reproducible.
Standard library only.
"""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class PairedResult:
    n: int
    mean_a: float
    mean_b: float
    difference: float          # mean(a) - mean(b)
    p_value: float             # two-sided, randomization test
    ci_low: float              # 95% bootstrap interval of the difference
    ci_high: float
    wins: int                  # queries where a > b
    losses: int                # queries where a < b

    def describe(self) -> str:
        return (f"Δ {self.difference:+.3f} (95% CI {self.ci_low:+.3f} .. {self.ci_high:+.3f}), "
                f"p = {self.p_value:.3f}, {self.wins} better / {self.losses} worse of {self.n}")


def paired_test(a: list[float], b: list[float], *, rounds: int = 10_000, seed: int = 1) -> PairedResult:
    if len(a) != len(b) or not a:
        raise ValueError("two non-empty score lists of the same queries are needed")
    n = len(a)
    diffs = [x - y for x, y in zip(a, b)]
    observed = sum(diffs) / n
    rng = random.Random(seed)
    nonzero = [d for d in diffs if d]
    # Zero differences do not change under a sign flip; the +1s count the observed labelling
    # itself, so the p-value is never 0 (Phipson & Smyth's correction).
    extreme = 0
    for _ in range(rounds):
        total = sum(d if rng.random() < 0.5 else -d for d in nonzero)
        if abs(total / n) >= abs(observed) - 1e-12:
            extreme += 1
    p = (extreme + 1) / (rounds + 1)
    means = []
    for _ in range(rounds):
        sample = [diffs[rng.randrange(n)] for _ in range(n)]
        means.append(sum(sample) / n)
    means.sort()
    low, high = means[int(0.025 * rounds)], means[int(0.975 * rounds) - 1]
    return PairedResult(n, sum(a) / n, sum(b) / n, observed, p, low, high,
                        sum(1 for d in diffs if d > 0), sum(1 for d in diffs if d < 0))
