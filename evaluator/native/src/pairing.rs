//! `NativeTurn`: one reference turn's expected calls, compiled once, and the score of a
//! turn's actual calls against them: `tool_correctness._assign` (+ the agent filter of
//! `assign_calls`) and the selection, parameters and sequence dimensions of
//! `score_turn`. Utilization and building the `ToolCorrectness` stay in Python.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PySequence, PyString};

use crate::argmatch::{Answer, Decline, Matcher};
use crate::kernels::{group_assign, lis_length, py_sum, Pair, SumMode};

static NEUMAIER: AtomicBool = AtomicBool::new(false);

pub fn set_sum_mode(neumaier: bool) {
    NEUMAIER.store(neumaier, Ordering::Relaxed);
}

fn sum_mode() -> SumMode {
    if NEUMAIER.load(Ordering::Relaxed) {
        SumMode::Neumaier
    } else {
        SumMode::Naive
    }
}

/// The expected side of one turn (see `tool_correctness.CompiledTurn`).
#[pyclass(frozen, module = "tracepass._evaluator_core")]
pub struct NativeTurn {
    /// expected name → expected indices, in order
    by_name: HashMap<String, Vec<usize>>,
    matchers: Vec<Matcher>,
    agents: Vec<Option<Py<PyString>>>,
    checks_agent: bool,
    sequence_matters: bool,
}

#[pymethods]
impl NativeTurn {
    /// `NativeTurn.build(names, arguments, modes, abs_tols, rel_tols, agents,
    /// sequence_matters)`: None when some expected call's matcher is not a kernel one.
    #[staticmethod]
    #[pyo3(signature = (names, arguments, modes, abs_tols, rel_tols, agents, sequence_matters))]
    #[allow(clippy::too_many_arguments)]
    fn build(
        names: Vec<String>,
        arguments: Vec<Bound<'_, PyAny>>,
        modes: Vec<String>,
        abs_tols: Vec<f64>,
        rel_tols: Vec<f64>,
        agents: Vec<Option<Bound<'_, PyString>>>,
        sequence_matters: bool,
    ) -> Option<NativeTurn> {
        let n = names.len();
        if [arguments.len(), modes.len(), abs_tols.len(), rel_tols.len(), agents.len()].iter().any(|&l| l != n) {
            return None;
        }
        let mut by_name: HashMap<String, Vec<usize>> = HashMap::new();
        let mut matchers = Vec::with_capacity(n);
        for (j, name) in names.into_iter().enumerate() {
            by_name.entry(name).or_default().push(j);
            matchers.push(Matcher::build(&modes[j], Some(arguments[j].clone()), abs_tols[j], rel_tols[j])?);
        }
        let checks_agent = agents.iter().any(Option::is_some);
        Some(NativeTurn {
            by_name,
            matchers,
            agents: agents.into_iter().map(|a| a.map(Bound::unbind)).collect(),
            checks_agent,
            sequence_matters,
        })
    }

    /// (paired calls, selection, parameters, sequence) of `calls` (a sequence of
    /// `ToolCall`) whose names as the reference spells them are `names`; None where the
    /// kernel declines (the Python path then scores the turn). Both sides non-empty.
    fn score(&self, calls: &Bound<'_, PyAny>, names: &Bound<'_, PyList>) -> Option<(usize, f64, f64, f64)> {
        self.score_inner(calls, names).ok()
    }
}

impl NativeTurn {
    fn score_inner(&self, calls: &Bound<'_, PyAny>, names: &Bound<'_, PyList>) -> Answer<(usize, f64, f64, f64)> {
        let py = calls.py();
        let calls = calls.cast::<PySequence>().map_err(|_| Decline)?;
        let n_a = calls.len()?;
        let n_e = self.matchers.len();
        if n_e == 0 || n_a == 0 || names.len() != n_a {
            return Err(Decline);
        }
        // Groups by name, in order of first call (as the Python dict of groups).
        let mut order: Vec<(&Vec<usize>, Vec<usize>)> = Vec::new();
        let mut slot: HashMap<&str, usize> = HashMap::new();
        let mut name_strs: Vec<Bound<'_, PyString>> = Vec::with_capacity(n_a);
        for item in names.iter() {
            name_strs.push(item.cast_into::<PyString>().map_err(|_| Decline)?);
        }
        let mut texts: Vec<&str> = Vec::with_capacity(n_a);
        for s in &name_strs {
            texts.push(s.to_str()?);
        }
        for (i, name) in texts.iter().enumerate() {
            if let Some((key, e_idx)) = self.by_name.get_key_value(*name) {
                let k = *slot.entry(key.as_str()).or_insert_with(|| {
                    order.push((e_idx, Vec::new()));
                    order.len() - 1
                });
                order[k].1.push(i);
            }
        }
        let mut args: Vec<Option<Bound<'_, PyDict>>> = vec![None; n_a];
        let mut score = |i: usize, j: usize| -> Answer<f64> {
            if args[i].is_none() {
                let call = calls.get_item(i)?;
                let a = call.getattr(pyo3::intern!(py, "arguments"))?;
                args[i] = Some(a.cast_into_exact::<PyDict>().map_err(|_| Decline)?);
            }
            self.matchers[j].score(py, args[i].as_ref().ok_or(Decline)?)
        };
        let mode = sum_mode();
        let mut pairs: Vec<Pair> = Vec::with_capacity(n_a.min(n_e));
        for (e_idx, a_idx) in &order {
            if a_idx.len() == 1 && e_idx.len() == 1 {
                let (i, j) = (a_idx[0], e_idx[0]);
                pairs.push((i, j, score(i, j)?));
                continue;
            }
            // Repeated tool called as expected in the expected order (every matcher
            // here is pure): the diagonal is the optimum, as in Python.
            let mut diag = Vec::with_capacity(a_idx.len().min(e_idx.len()));
            for (&i, &j) in a_idx.iter().zip(e_idx.iter()) {
                diag.push((i, j, score(i, j)?));
            }
            if diag.iter().all(|p| p.2 == 1.0) {
                pairs.extend(diag);
                continue;
            }
            let mut scores = Vec::with_capacity(a_idx.len());
            for &i in a_idx {
                let mut row = Vec::with_capacity(e_idx.len());
                for &j in e_idx.iter() {
                    row.push(score(i, j)?);
                }
                scores.push(row);
            }
            pairs.extend(group_assign(a_idx, e_idx, &scores, mode).ok_or(Decline)?);
        }
        pairs.sort_by_key(|p| p.0);
        if self.checks_agent {
            let mut kept = Vec::with_capacity(pairs.len());
            for p in pairs {
                if self.agents_agree(calls, p.0, p.1)? {
                    kept.push(p);
                }
            }
            pairs = kept;
        }
        let p = pairs.len();
        let selection = p as f64 / (n_a + n_e - p) as f64;
        let parameters = py_sum(pairs.iter().map(|x| x.2), mode) / n_e as f64;
        let sequence = if self.sequence_matters {
            let js: Vec<usize> = pairs.iter().map(|x| x.1).collect();
            lis_length(&js) as f64 / n_e as f64
        } else {
            1.0
        };
        Ok((p, selection, parameters, sequence))
    }

    /// `expected.agent is None or call.agent == expected.agent`.
    fn agents_agree(&self, calls: &Bound<'_, PySequence>, i: usize, j: usize) -> Answer<bool> {
        let Some(agent) = &self.agents[j] else { return Ok(true) };
        let py = calls.py();
        let called = calls.get_item(i)?.getattr(pyo3::intern!(py, "agent"))?;
        Ok(called.eq(agent.bind(py))?)
    }
}
