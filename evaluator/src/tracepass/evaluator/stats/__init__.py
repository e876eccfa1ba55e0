"""Statistics over scored conversations (docs/statistics.md): pass@k and pass^k
estimators (`passk.py`), readiness tiers (`readiness.py`), the rolling windows
(`rolling.py`, with its settings `_rolling_config.py` and persisted form
`_rolling_state.py`), drift detection (`cusum.py`) and which conversations are evaluated
(`conversation_sampling.py`).

Exports nothing itself: import from the modules (`tracepass.evaluator.stats.passk`, …),
so that loading one of them does not load scipy for the others.
"""

__all__: list[str] = []
