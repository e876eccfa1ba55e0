"""Judge–human agreement: hand-computed values and properties."""

from __future__ import annotations

import math
from collections import Counter
from statistics import NormalDist

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from tracepass.evaluator.judge.agreement import (
    agreement,
    cohens_kappa,
    confusion_matrix,
    parse_label,
    rogan_gladen,
)


def labels(tp: int, fn: int, fp: int, tn: int) -> tuple[list[bool], list[bool]]:
    """(judge, human) lists realising the given confusion matrix."""
    judge = [True] * tp + [False] * fn + [True] * fp + [False] * tn
    human = [True] * tp + [True] * fn + [False] * fp + [False] * tn
    return judge, human


def test_hand_computed_report() -> None:
    judge, human = labels(tp=40, fn=10, fp=5, tn=45)
    r = agreement(judge, human)
    assert (r.matrix.tp, r.matrix.fn, r.matrix.fp, r.matrix.tn, r.n) == (40, 10, 5, 45, 100)
    assert r.accuracy == pytest.approx(0.85)
    # p_e = 0.45·0.5 + 0.55·0.5 = 0.5 → κ = (0.85 − 0.5) / 0.5
    assert r.kappa == pytest.approx(0.7)
    assert (r.sensitivity, r.specificity) == (pytest.approx(0.8), pytest.approx(0.9))
    assert (r.judge_pass_rate, r.human_pass_rate) == (pytest.approx(0.45), pytest.approx(0.5))
    # (0.45 + 0.9 − 1) / (0.8 + 0.9 − 1) = 0.35 / 0.7
    assert r.corrected_pass_rate.value == pytest.approx(0.5)
    assert r.notes == ()


def test_population_rate_and_clipping() -> None:
    judge, human = labels(tp=40, fn=10, fp=5, tn=45)
    r = agreement(judge, human, population_pass_rate=0.6)
    assert r.corrected_pass_rate.value == pytest.approx(0.5 / 0.7)
    low = rogan_gladen(0.05, 0.8, 0.9)
    assert low.value == 0.0
    assert low.raw == pytest.approx(-0.05 / 0.7)
    assert low.clipped
    assert low.note is not None
    high = rogan_gladen(1.0, 0.8, 0.9)
    assert (high.value, high.clipped) == (1.0, True)


def test_wikipedia_kappa_example() -> None:
    # 50 proposals: both yes 20, A yes/B no 5, A no/B yes 10, both no 15 → κ = 0.4
    a = [True] * 20 + [True] * 5 + [False] * 10 + [False] * 15
    b = [True] * 20 + [False] * 5 + [True] * 10 + [False] * 15
    assert cohens_kappa(a, b) == pytest.approx(0.4)


def test_multiclass_kappa() -> None:
    a = ["good", "good", "bad", "meh", "bad", "good"]
    b = ["good", "meh", "bad", "meh", "good", "good"]
    p_o = 4 / 6
    p_e = (3 * 3 + 2 * 1 + 1 * 2) / 36
    assert cohens_kappa(a, b) == pytest.approx((p_o - p_e) / (1 - p_e))


def test_degenerate_cases() -> None:
    assert cohens_kappa([], []) is None
    assert cohens_kappa([True] * 5, [True] * 5) is None
    # different constant labels: p_e = 0, p_o = 0 → κ = 0
    assert cohens_kappa([True] * 3, [False] * 3) == 0.0
    r = agreement([], [])
    assert r.accuracy is None
    assert r.kappa is None
    assert r.corrected_pass_rate.value is None
    assert "no labelled items" in r.notes
    r = agreement([True, False], [True, True])
    assert r.specificity is None
    assert r.corrected_pass_rate.value is None
    assert r.corrected_pass_rate.note is not None
    assert any("specificity undefined" in n for n in r.notes)
    with pytest.raises(ValueError, match="differ in length: 2 vs 1"):
        confusion_matrix([True, False], [True])


def test_judge_no_better_than_chance() -> None:
    c = rogan_gladen(0.5, 0.5, 0.5)
    assert c.value is None
    assert c.note is not None
    assert "≤ 1" in c.note
    assert rogan_gladen(0.5, 0.3, 0.4).value is None
    with pytest.raises(ValueError, match="within"):
        rogan_gladen(1.5, 0.9, 0.9)


def test_parse_label() -> None:
    for v in ("pass", "YES", " true ", "1", 1, True, "correct"):
        assert parse_label(v) is True
    for v in ("fail", "No", "0", 0, False, "incorrect"):
        assert parse_label(v) is False
    with pytest.raises(ValueError, match="cannot read 'maybe'"):
        parse_label("maybe")


pairs = st.lists(st.tuples(st.booleans(), st.booleans()), max_size=60)


@given(st.lists(st.sampled_from("abcd"), min_size=1, max_size=40))
def test_kappa_identical_labels_is_one(xs: list[str]) -> None:
    assume(len(set(xs)) > 1)
    assert cohens_kappa(xs, xs) == pytest.approx(1.0)


@given(pairs)
def test_kappa_symmetric_and_bounded(ps: list[tuple[bool, bool]]) -> None:
    a = [p[0] for p in ps]
    b = [p[1] for p in ps]
    k1, k2 = cohens_kappa(a, b), cohens_kappa(b, a)
    assert (k1 is None) == (k2 is None)
    if k1 is not None and k2 is not None:
        assert k1 == pytest.approx(k2)
        assert -1.0 - 1e-12 <= k1 <= 1.0 + 1e-12


@given(pairs)
def test_kappa_matches_matrix_formula(ps: list[tuple[bool, bool]]) -> None:
    a = [p[0] for p in ps]
    b = [p[1] for p in ps]
    m = confusion_matrix(a, b)
    n = m.n
    assume(n > 0)
    c = Counter(ps)
    assert (m.tp, m.fn, m.fp, m.tn) == (
        c[(True, True)],
        c[(False, True)],
        c[(True, False)],
        c[(False, False)],
    )
    p_o = (m.tp + m.tn) / n
    p_e = ((m.tp + m.fp) * (m.tp + m.fn) + (m.fn + m.tn) * (m.fp + m.tn)) / n**2
    k = cohens_kappa(a, b)
    if p_e == 1:
        assert k is None
    else:
        assert k == pytest.approx((p_o - p_e) / (1 - p_e))


@given(pairs)
def test_in_sample_correction_recovers_human_rate(ps: list[tuple[bool, bool]]) -> None:
    judge = [p[0] for p in ps]
    human = [p[1] for p in ps]
    r = agreement(judge, human)
    if r.corrected_pass_rate.value is not None:
        assert not r.corrected_pass_rate.clipped
        assert r.corrected_pass_rate.value == pytest.approx(r.human_pass_rate)


@given(
    st.floats(0, 1),
    st.floats(0.01, 1),
    st.floats(0.01, 1),
)
def test_rogan_gladen_inverts_misclassification(p: float, se: float, sp: float) -> None:
    assume(se + sp > 1.05)
    p_obs = se * p + (1 - sp) * (1 - p)
    assert rogan_gladen(p_obs, se, sp).value == pytest.approx(p, abs=1e-9)


def test_interval_hand_computed() -> None:
    # se = 0.8 (n_pos 50), sp = 0.9 (n_neg 50), p_obs exact (n_obs None)
    r = rogan_gladen(0.45, 0.8, 0.9, n_pos=50, n_neg=50)
    z = NormalDist().inv_cdf(0.975)
    n_adj = 50 + z * z
    se_adj = (40 + z * z / 2) / n_adj
    sp_adj = (45 + z * z / 2) / n_adj
    var = (0.5**2 * se_adj * (1 - se_adj) / n_adj + 0.5**2 * sp_adj * (1 - sp_adj) / n_adj) / 0.7**2
    assert r.value == pytest.approx(0.5)
    assert r.lower == pytest.approx(0.5 - z * math.sqrt(var))
    assert r.upper == pytest.approx(0.5 + z * math.sqrt(var))
    assert r.level == 0.95
    assert rogan_gladen(0.45, 0.8, 0.9).lower is None  # no sample sizes, no interval


def test_interval_in_report_and_population_size() -> None:
    judge, human = labels(tp=40, fn=10, fp=5, tn=45)
    r = agreement(judge, human, population_pass_rate=0.6, population_size=10_000)
    c = r.corrected_pass_rate
    assert c.lower is not None
    assert c.upper is not None
    assert c.value is not None
    assert c.lower < c.value < c.upper
    wider = agreement(
        judge, human, population_pass_rate=0.6, population_size=50
    ).corrected_pass_rate
    assert wider.lower is not None
    assert wider.upper is not None
    assert wider.upper - wider.lower > c.upper - c.lower


def test_interval_coverage_monte_carlo() -> None:
    """The approximate interval covers the true rate at least at its nominal level in
    representative settings (it is conservative; fixed seed, 2,000 replications)."""
    rng = np.random.default_rng(20240601)
    for p, se, sp, n_pos, n_neg, n_obs in [
        (0.7, 0.9, 0.85, 60, 40, 2000),
        (0.5, 0.8, 0.8, 50, 50, 1000),
        (0.3, 0.85, 0.95, 30, 70, 500),
    ]:
        p_obs = rng.binomial(n_obs, se * p + (1 - sp) * (1 - p), 2000) / n_obs
        ses = rng.binomial(n_pos, se, 2000) / n_pos
        sps = rng.binomial(n_neg, sp, 2000) / n_neg
        hits = total = 0
        for po, s, c in zip(p_obs, ses, sps, strict=True):
            r = rogan_gladen(float(po), float(s), float(c), n_obs=n_obs, n_pos=n_pos, n_neg=n_neg)
            if r.lower is None or r.upper is None:
                continue
            total += 1
            hits += r.lower <= p <= r.upper
        assert total > 1900
        assert hits / total >= 0.94, (p, se, sp, hits / total)
