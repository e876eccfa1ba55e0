"""Judge–human agreement statistics (for `tracepass review import`).

People label a sample of turns the LLM judge has scored; these functions say how far the
judge can be trusted and what the success rate is once its errors are accounted for.
Conventions: "positive" = pass/correct; the *human* label is the truth and the *judge*
label the test, so

    sensitivity = TP / (TP + FN)   P(judge passes | human passes)
    specificity = TN / (TN + FP)   P(judge fails  | human fails)

Rogan–Gladen: a judge with sensitivity `se` and specificity `sp` observes a pass rate
p_obs = se·p + (1 − sp)·(1 − p) for a true rate p, hence

    p = (p_obs + sp − 1) / (se + sp − 1)

defined only when se + sp > 1 (Youden's J > 0: the judge beats a coin). Sampling noise
can push the estimate outside [0, 1]; it is clipped and the clipping is reported.
Undefined quantities are None with a note, never 0.0 or a division error.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Sequence
from statistics import NormalDist

from pydantic import BaseModel, ConfigDict

__all__ = [
    "AgreementReport",
    "ConfusionMatrix",
    "CorrectedRate",
    "agreement",
    "cohens_kappa",
    "confusion_matrix",
    "parse_label",
    "rogan_gladen",
]

_TRUE = frozenset({"1", "true", "t", "yes", "y", "pass", "passed", "correct", "ok", "good"})
_FALSE = frozenset({"0", "false", "f", "no", "n", "fail", "failed", "incorrect", "wrong", "bad"})


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


class ConfusionMatrix(_Frozen):
    """Rows: human label; columns: judge label. tp = both pass, tn = both fail,
    fp = judge passes what the human failed, fn = judge fails what the human passed."""

    tp: int
    fp: int
    fn: int
    tn: int

    @property
    def n(self) -> int:
        return self.tp + self.fp + self.fn + self.tn


class CorrectedRate(_Frozen):
    value: float | None
    raw: float | None  # before clipping
    clipped: bool = False
    note: str | None = None
    # Approximate confidence interval (see `rogan_gladen`); None without sample sizes.
    lower: float | None = None
    upper: float | None = None
    level: float | None = None


class AgreementReport(_Frozen):
    n: int
    matrix: ConfusionMatrix
    accuracy: float | None
    kappa: float | None
    sensitivity: float | None
    specificity: float | None
    judge_pass_rate: float | None
    human_pass_rate: float | None
    corrected_pass_rate: CorrectedRate
    notes: tuple[str, ...] = ()


def parse_label(value: object) -> bool:
    """A human label as pass (True) / fail (False); raises ValueError naming the value."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().casefold() in _TRUE:
        return True
    if isinstance(value, str) and value.strip().casefold() in _FALSE:
        return False
    raise ValueError(
        f"cannot read {value!r} as a label; use one of pass/fail, yes/no, true/false, 1/0"
    )


def _check_pairs(a: Sequence[object], b: Sequence[object]) -> None:
    if len(a) != len(b):
        raise ValueError(f"label sequences differ in length: {len(a)} vs {len(b)}")


def confusion_matrix(judge: Sequence[bool], human: Sequence[bool]) -> ConfusionMatrix:
    _check_pairs(judge, human)
    tp = fp = fn = tn = 0
    for j, h in zip(judge, human, strict=True):
        if h:
            tp, fn = (tp + 1, fn) if j else (tp, fn + 1)
        else:
            fp, tn = (fp + 1, tn) if j else (fp, tn + 1)
    return ConfusionMatrix(tp=tp, fp=fp, fn=fn, tn=tn)


def cohens_kappa(a: Sequence[Hashable], b: Sequence[Hashable]) -> float | None:
    """Cohen's kappa for two raters over any label set: (p_o − p_e) / (1 − p_e).

    None when there are no items, or when chance agreement p_e is 1 (both raters used
    one and the same label for everything): agreement is then perfect but carries no
    information, and the ratio is 0/0.
    """
    _check_pairs(a, b)
    n = len(a)
    if n == 0:
        return None
    p_o = sum(x == y for x, y in zip(a, b, strict=True)) / n
    ca, cb = Counter(a), Counter(b)
    p_e = sum(ca[k] * cb[k] for k in ca) / (n * n)
    if p_e >= 1.0:
        return None
    return (p_o - p_e) / (1.0 - p_e)


def _ac_var(p: float, n: int, z: float) -> float:
    """Agresti–Coull-adjusted variance of a proportion estimated from n trials: never 0,
    so a sample with se = 1 (no false fails seen yet) does not claim certainty."""
    n_adj = n + z * z
    p_adj = (p * n + z * z / 2.0) / n_adj
    return p_adj * (1.0 - p_adj) / n_adj


def rogan_gladen(
    p_obs: float,
    sensitivity: float | None,
    specificity: float | None,
    *,
    n_obs: int | None = None,
    n_pos: int | None = None,
    n_neg: int | None = None,
    level: float = 0.95,
) -> CorrectedRate:
    """The judge-error-corrected success rate (see the module docstring).

    With the sample sizes behind each input — `n_obs` items behind `p_obs`, `n_pos`
    human-passed and `n_neg` human-failed labelled items behind sensitivity and
    specificity — an approximate `level` confidence interval is added: the delta method,

        Var(p) ≈ [Var(p_obs) + p²·Var(se) + (1 − p)²·Var(sp)] / (se + sp − 1)²,

    with Agresti–Coull-adjusted binomial variances, clipped to [0, 1]. `n_obs=None`
    treats `p_obs` as exact (a very large run). It treats the three estimates as
    independent; within the labelled sample they are not, and the interval is then
    conservative.
    """
    if not 0.0 <= p_obs <= 1.0:
        raise ValueError(f"observed rate must be within [0, 1], got {p_obs}")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be within (0, 1), got {level}")
    if sensitivity is None or specificity is None:
        return CorrectedRate(
            value=None,
            raw=None,
            note="sensitivity or specificity unknown: the labelled sample needs both "
            "human passes and human fails",
        )
    youden = sensitivity + specificity - 1.0
    if youden <= 0.0:
        return CorrectedRate(
            value=None,
            raw=None,
            note=f"sensitivity + specificity = {sensitivity + specificity:.3f} ≤ 1: the judge "
            "does no better than chance, so its pass rate cannot be corrected",
        )
    raw = (p_obs + specificity - 1.0) / youden
    value = min(1.0, max(0.0, raw))
    clipped = value != raw
    note = (
        f"estimate {raw:.3f} clipped to [0, 1]: sampling noise in sensitivity/specificity"
        if clipped
        else None
    )
    lower = upper = used_level = None
    if n_pos and n_neg:
        z = NormalDist().inv_cdf(0.5 + level / 2.0)
        var = (
            (_ac_var(p_obs, n_obs, z) if n_obs else 0.0)
            + value**2 * _ac_var(sensitivity, n_pos, z)
            + (1.0 - value) ** 2 * _ac_var(specificity, n_neg, z)
        ) / youden**2
        half = z * math.sqrt(var)
        lower, upper, used_level = max(0.0, value - half), min(1.0, value + half), level
    return CorrectedRate(
        value=value,
        raw=raw,
        clipped=clipped,
        note=note,
        lower=lower,
        upper=upper,
        level=used_level,
    )


def _ratio(num: int, den: int) -> float | None:
    return num / den if den else None


def agreement(
    judge: Sequence[bool],
    human: Sequence[bool],
    *,
    population_pass_rate: float | None = None,
    population_size: int | None = None,
    level: float = 0.95,
) -> AgreementReport:
    """Everything `tracepass review import` prints.

    `population_pass_rate` is the judge's pass rate over *all* judged turns (the labelled
    sample is usually a subset); the correction is applied to it. By default the judge's
    pass rate within the sample is used. `population_size` (the number of judged turns
    behind `population_pass_rate`) enters the interval; when the rate is given without
    it, the rate is taken as exact.
    """
    m = confusion_matrix(judge, human)
    n = m.n
    notes: list[str] = []
    sens = _ratio(m.tp, m.tp + m.fn)
    spec = _ratio(m.tn, m.tn + m.fp)
    judge_rate = _ratio(m.tp + m.fp, n)
    human_rate = _ratio(m.tp + m.fn, n)
    kappa = cohens_kappa(list(judge), list(human))
    if n == 0:
        notes.append("no labelled items")
    elif kappa is None:
        notes.append("kappa undefined: judge and humans each gave a single identical label")
    if n and sens is None:
        notes.append("no human-passed items: sensitivity undefined")
    if n and spec is None:
        notes.append("no human-failed items: specificity undefined")
    p_obs: float | None
    n_obs: int | None
    if population_pass_rate is not None:
        p_obs, n_obs = population_pass_rate, population_size
    else:
        p_obs, n_obs = judge_rate, n
    corrected = (
        rogan_gladen(
            p_obs, sens, spec, n_obs=n_obs, n_pos=m.tp + m.fn, n_neg=m.tn + m.fp, level=level
        )
        if p_obs is not None
        else CorrectedRate(value=None, raw=None, note="no observed pass rate")
    )
    return AgreementReport(
        n=n,
        matrix=m,
        accuracy=_ratio(m.tp + m.tn, n),
        kappa=kappa,
        sensitivity=sens,
        specificity=spec,
        judge_pass_rate=judge_rate,
        human_pass_rate=human_rate,
        corrected_pass_rate=corrected,
        notes=tuple(notes),
    )
