"""`tracepass compare`: posterior probability, per-reference diffs, exit codes, pairwise judge."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _cli_factories import results_doc, write_doc
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import special
from typer.testing import CliRunner

from tracepass.collector.app.cli.main import app
from tracepass.evaluator.offline.version_comparison import (
    compare_documents,
    pass_point,
    prob_better,
)

runner = CliRunner()


def closed_form_prob_better(a1: int, b1: int, a2: int, b2: int) -> float:
    """P(X > Y), X ~ Beta(a1, b1), Y ~ Beta(a2, b2), integer parameters (exact sum)."""
    total = 0.0
    for i in range(a1):
        total += math.exp(
            special.betaln(a2 + i, b1 + b2)
            - math.log(b1 + i)
            - special.betaln(1 + i, b1)
            - special.betaln(a2, b2)
        )
    return total


@settings(max_examples=60, deadline=None)
@given(
    n1=st.integers(0, 60),
    n2=st.integers(0, 60),
    f1=st.floats(0, 1),
    f2=st.floats(0, 1),
)
def test_prob_better_matches_closed_form(n1: int, n2: int, f1: float, f2: float) -> None:
    c1, c2 = round(n1 * f1), round(n2 * f2)
    expected = closed_form_prob_better(c1 + 1, n1 - c1 + 1, c2 + 1, n2 - c2 + 1)
    assert prob_better(c1, n1, c2, n2) == pytest.approx(expected, abs=1e-8)


def test_prob_better_large_counts_and_monte_carlo() -> None:
    # Narrow posteriors: integration must still find the mass.
    p = prob_better(9_100, 10_000, 9_000, 10_000)
    rng = np.random.default_rng(7)
    x = rng.beta(9_101, 901, 400_000)
    y = rng.beta(9_001, 1_001, 400_000)
    assert p == pytest.approx(float(np.mean(x > y)), abs=3e-3)
    assert p > 0.99
    assert prob_better(5, 10, 5, 10) == pytest.approx(0.5, abs=1e-9)


def test_pass_point_unbiased_and_plugin() -> None:
    # n >= k: unbiased C(c,k)/C(n,k); n < k: plug-in p^k.
    assert pass_point(5, 3, 2, power=True) == pytest.approx(3 / 10)
    assert pass_point(5, 3, 2, power=False) == pytest.approx(1 - 1 / 10)
    assert pass_point(1, 1, 3, power=True) == pytest.approx(1.0)
    assert pass_point(2, 1, 3, power=True) == pytest.approx(0.125)
    assert pass_point(0, 0, 1, power=True) is None


def test_compare_documents_regressions_first() -> None:
    base = results_doc({"a": [True] * 4, "b": [True] * 4, "c": [False] * 4, "d": [True]})
    cand = results_doc(
        {"a": [True, False, False, False], "b": [True] * 4, "c": [True] * 4, "e": [True]},
        version="2.0",
    )
    out = compare_documents(base, cand)
    refs = [e["reference_id"] for e in out["references"]]
    assert refs[0] == "a"
    assert out["regressions"] == ["a"]
    by_id = {e["reference_id"]: e for e in out["references"]}
    assert by_id["c"]["status"] == "improved"
    assert by_id["b"]["status"] == "unchanged"
    assert by_id["d"]["status"] == "only_base"
    assert by_id["e"]["status"] == "only_candidate"
    assert by_id["a"]["delta_rate"] == pytest.approx(-0.75)
    assert by_id["a"]["prob_candidate_better"] < 0.05
    assert by_id["a"]["pass_pow_k"]["3"]["base"] == pytest.approx(1.0)
    assert by_id["a"]["pass_pow_k"]["3"]["candidate"] == pytest.approx(0.0)
    overall = out["overall"]
    assert overall["base"]["n"] == 13
    assert overall["candidate"]["n"] == 13
    assert set(overall["pass_at_k"]) == {"1", "3", "5"}


def test_compare_rejects_non_evaluate_json() -> None:
    from tracepass.evaluator.offline.version_comparison import CompareInputError

    with pytest.raises(CompareInputError, match="missing key 'summary'"):
        compare_documents({"conversations": []}, results_doc({"a": [True]}))


def _files(tmp_path: Path) -> tuple[Path, Path]:
    base = write_doc(tmp_path / "base.json", results_doc({"a": [True] * 3, "b": [True] * 3}))
    cand = write_doc(
        tmp_path / "cand.json",
        results_doc({"a": [False] * 3, "b": [True] * 3}, version="2.0"),
    )
    return base, cand


def test_cli_compare_json_and_exit_codes(tmp_path: Path) -> None:
    base, cand = _files(tmp_path)
    res = runner.invoke(app, ["compare", str(base), str(cand), "--format", "json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["regressions"] == ["a"]
    res = runner.invoke(app, ["compare", str(base), str(cand), "--fail-on-regression"])
    assert res.exit_code == 1
    assert "regression" in res.stdout
    res = runner.invoke(app, ["compare", str(base), str(base), "--fail-on-regression"])
    assert res.exit_code == 0
    assert "no regressions" in res.stdout


def test_cli_compare_bad_inputs(tmp_path: Path) -> None:
    base, _ = _files(tmp_path)
    res = runner.invoke(app, ["compare", str(base), str(tmp_path / "missing.json")])
    assert res.exit_code == 2
    assert "missing.json: no such file" in res.stderr
    bad = tmp_path / "bad.json"
    bad.write_text('{"summary": {},\n "conversations": [', encoding="utf-8")
    res = runner.invoke(app, ["compare", str(base), str(bad)])
    assert res.exit_code == 2
    assert "bad.json:2:" in res.stderr
    assert "invalid JSON" in res.stderr
    res = runner.invoke(app, ["compare", str(base), str(base), "--tolerance", "2"])
    assert res.exit_code == 2


# --------------------------------------------------------------------------- pairwise judge


def _fake_models() -> Any:
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage, BaseMessage
    from langchain_core.outputs import ChatGeneration, ChatResult

    class AlwaysA(BaseChatModel):
        """A maximally position-biased judge."""

        @property
        def _llm_type(self) -> str:
            return "always-a"

        def _generate(
            self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
        ) -> ChatResult:
            return ChatResult(
                generations=[ChatGeneration(message=AIMessage('{"reasoning": "A", "score": 1}'))]
            )

    class Prefers42(BaseChatModel):
        """Prefers the answer saying 42, whatever its position."""

        @property
        def _llm_type(self) -> str:
            return "prefers-42"

        def _generate(
            self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
        ) -> ChatResult:
            text = str(messages[-1].content)
            a = text.split("<answer_a>")[1].split("</answer_a>")[0]
            b = text.split("<answer_b>")[1].split("</answer_b>")[0]
            score = 1 if "42" in a and "42" not in b else 0 if "42" in b and "42" not in a else 0.5
            reply = f'Sure.\n```json\n{{"reasoning": "x", "score": {score}}}\n```'
            return ChatResult(generations=[ChatGeneration(message=AIMessage(reply))])

    return AlwaysA, Prefers42


ALWAYS_A, PREFERS_42 = _fake_models()
always_a = ALWAYS_A()


def make_prefers_42() -> Any:
    return PREFERS_42()


def test_cli_compare_pairwise_judge_cancels_position_bias(tmp_path: Path) -> None:
    base, cand = _files(tmp_path)  # base "a" answers 42, candidate "a" answers <b>41</b>
    res = runner.invoke(
        app,
        ["compare", str(base), str(cand), "--format", "json", "--judge", f"{__name__}:always_a"],
    )
    assert res.exit_code == 0, res.output
    counts = json.loads(res.stdout)["pairwise"]["counts"]
    assert counts == {"base": 0, "candidate": 0, "tie": 2, "error": 0}

    res = runner.invoke(
        app,
        [
            "compare",
            str(base),
            str(cand),
            "--format",
            "json",
            "--judge",
            f"{__name__}:make_prefers_42",
        ],
    )
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)["pairwise"]
    assert data["counts"] == {"base": 1, "candidate": 0, "tie": 1, "error": 0}
    a_item = next(i for i in data["items"] if i["reference_id"] == "a")
    assert a_item["winner"] == "base"
    assert a_item["verdicts"] == ["A", "B"]


def test_cli_compare_bad_judge_spec(tmp_path: Path) -> None:
    base, cand = _files(tmp_path)
    for spec, msg in (
        ("nocolon", "expected module:attr"),
        ("no_such_module_xyz:x", "cannot import module"),
        (f"{__name__}:missing_attr", "has no attribute"),
        (f"{__name__}:runner", "is not a BaseChatModel"),
    ):
        res = runner.invoke(app, ["compare", str(base), str(cand), "--judge", spec])
        assert res.exit_code == 2, spec
        assert msg in res.stderr, (spec, res.stderr)
