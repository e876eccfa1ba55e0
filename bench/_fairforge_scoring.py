"""Fair Forge's own tool scoring on a dataset, timed; run by bench_evaluate.py with the
Python of a bench-only environment where `alquimia-fair-forge` is installed (never
imported by tracepass). Prints one JSON line: turns, CPU seconds of loading (JSON +
Fair Forge's `Dataset` models) and of scoring (`Agentic._evaluate_tool_correctness` per
turn, the judge bypassed: no model is called)."""

from __future__ import annotations

import gc
import json
import logging
import sys
import time


def main() -> None:
    from fair_forge.metrics.agentic import Agentic
    from fair_forge.schemas.common import Dataset

    path, repeats = sys.argv[1], int(sys.argv[2])
    metric = object.__new__(Agentic)  # no retriever, no model: tool scoring only
    metric.logger = logging.getLogger("fairforge-bench")
    metric.tool_threshold = 1.0
    metric.tool_weights = {
        "selection": 0.25,
        "parameters": 0.25,
        "sequence": 0.25,
        "utilization": 0.25,
    }
    results = []
    for _ in range(repeats):
        gc.collect()
        c0 = time.process_time()
        with open(path, encoding="utf-8") as f:
            datasets = [Dataset.model_validate(d) for d in json.load(f)]
        c1 = time.process_time()
        turns = 0
        for ds in datasets:
            for batch in ds.conversation:
                turns += 1
                if batch.ground_truth_agentic and batch.agentic and batch.agentic.get("tools_used"):
                    metric._evaluate_tool_correctness(batch.agentic, batch.ground_truth_agentic)
        c2 = time.process_time()
        results.append({"turns": turns, "load_s": c1 - c0, "score_s": c2 - c1})
    print(json.dumps(results))


if __name__ == "__main__":
    main()
