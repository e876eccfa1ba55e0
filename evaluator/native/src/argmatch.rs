//! Argument matching over the Python objects themselves (no copy into Rust values):
//! `scoring/argmatch.py`'s `deep_equal`, `numeric_equal` and the built-in matchers'
//! per-key credit. Only exact JSON types are walked (str, bool, None, int, float, dict,
//! list, tuple); anything else declines (`Decline`), because its `==`, `isinstance` and
//! `Mapping` answers are the object's own and only the Python code asks them the same way.

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

use crate::kernels::isclose;

/// The kernel cannot answer exactly; the Python path must.
#[derive(Debug)]
pub struct Decline;

impl From<PyErr> for Decline {
    fn from(_: PyErr) -> Self {
        Decline
    }
}

pub type Answer<T> = Result<T, Decline>;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Str,
    Bool,
    Null,
    Number,
    Dict,
    Seq,
    Other,
}

fn kind(x: &Bound<'_, PyAny>) -> Kind {
    if x.is_exact_instance_of::<PyString>() {
        Kind::Str
    } else if x.is_exact_instance_of::<PyDict>() {
        Kind::Dict
    } else if x.is_exact_instance_of::<PyFloat>() || x.is_exact_instance_of::<PyInt>() {
        Kind::Number
    } else if x.is_exact_instance_of::<PyBool>() {
        Kind::Bool
    } else if x.is_none() {
        Kind::Null
    } else if x.is_exact_instance_of::<PyList>() || x.is_exact_instance_of::<PyTuple>() {
        Kind::Seq
    } else {
        Kind::Other
    }
}

fn py_eq(a: &Bound<'_, PyAny>, b: &Bound<'_, PyAny>) -> Answer<bool> {
    Ok(a.eq(b)?)
}

fn seq_items<'py>(x: &Bound<'py, PyAny>) -> Answer<Vec<Bound<'py, PyAny>>> {
    if let Ok(list) = x.cast::<PyList>() {
        Ok(list.iter().collect())
    } else if let Ok(tuple) = x.cast::<PyTuple>() {
        Ok(tuple.iter().collect())
    } else {
        Err(Decline)
    }
}

/// `deep_equal(a, b)`.
pub fn deep_eq(a: &Bound<'_, PyAny>, b: &Bound<'_, PyAny>) -> Answer<bool> {
    if a.is(b) {
        return Ok(true);
    }
    let kb = kind(b);
    match kind(a) {
        // `type(a) is type(b) and a == b`; the same bool or None would be `a is b`.
        Kind::Str => Ok(kb == Kind::Str && py_eq(a, b)?),
        Kind::Bool | Kind::Null => Ok(false),
        Kind::Number => match kb {
            Kind::Number => py_eq(a, b),
            Kind::Other => Err(Decline), // an int subclass would be a number
            _ => Ok(false),
        },
        Kind::Dict => match kb {
            Kind::Dict => dict_all(a, b, deep_eq),
            Kind::Other => Err(Decline),
            _ => Ok(false),
        },
        Kind::Seq => match kb {
            Kind::Seq => seq_all(a, b, deep_eq),
            Kind::Other => Err(Decline),
            _ => Ok(false),
        },
        Kind::Other => Err(Decline),
    }
}

fn dict_all(
    a: &Bound<'_, PyAny>,
    b: &Bound<'_, PyAny>,
    eq: impl Fn(&Bound<'_, PyAny>, &Bound<'_, PyAny>) -> Answer<bool> + Copy,
) -> Answer<bool> {
    let (a, b) = (a.cast::<PyDict>().map_err(|_| Decline)?, b.cast::<PyDict>().map_err(|_| Decline)?);
    if a.len() != b.len() {
        return Ok(false);
    }
    for (k, v) in a.iter() {
        match b.get_item(&k)? {
            Some(bv) => {
                if !eq(&v, &bv)? {
                    return Ok(false);
                }
            }
            None => return Ok(false),
        }
    }
    Ok(true)
}

fn seq_all(
    a: &Bound<'_, PyAny>,
    b: &Bound<'_, PyAny>,
    eq: impl Fn(&Bound<'_, PyAny>, &Bound<'_, PyAny>) -> Answer<bool> + Copy,
) -> Answer<bool> {
    let (xs, ys) = (seq_items(a)?, seq_items(b)?);
    if xs.len() != ys.len() {
        return Ok(false);
    }
    for (x, y) in xs.iter().zip(ys.iter()) {
        if !eq(x, y)? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// `numeric_equal(a, b, abs_tol, rel_tol)` (tolerances checked non-negative by the caller).
pub fn numeric_eq(a: &Bound<'_, PyAny>, b: &Bound<'_, PyAny>, abs_tol: f64, rel_tol: f64) -> Answer<bool> {
    let kb = kind(b);
    match kind(a) {
        Kind::Number => match kb {
            // `math.isclose` converts both to doubles (a too large int raises: decline).
            Kind::Number => Ok(isclose(a.extract::<f64>()?, b.extract::<f64>()?, rel_tol, abs_tol)),
            Kind::Other => Err(Decline),
            _ => Ok(false),
        },
        Kind::Dict => match kb {
            Kind::Dict => dict_all(a, b, |x, y| numeric_eq(x, y, abs_tol, rel_tol)),
            Kind::Other => Err(Decline),
            _ => Ok(false),
        },
        Kind::Seq => match kb {
            Kind::Seq => seq_all(a, b, |x, y| numeric_eq(x, y, abs_tol, rel_tol)),
            Kind::Other => Err(Decline),
            _ => Ok(false),
        },
        _ => deep_eq(a, b),
    }
}

/// A built-in matcher of `argmatch._compile` with its expected arguments.
pub enum Matcher {
    /// `ignore`, or no expected arguments.
    Always,
    Exact(Py<PyDict>),
    Subset(Py<PyDict>),
    Superset(Py<PyDict>),
    Numeric(Py<PyDict>, f64, f64),
}

impl Matcher {
    /// The matcher for (mode, expected arguments, abs_tol, rel_tol); None when the
    /// Python matcher is not one of these (regex, custom callables) or its inputs are not
    /// plain (a non-dict expectation, negative tolerances: Python raises).
    pub fn build(mode: &str, expected: Option<Bound<'_, PyAny>>, abs_tol: f64, rel_tol: f64) -> Option<Self> {
        // No expected arguments: every mode scores 1.0 (a custom matcher is not even
        // imported), as `_compile` does.
        let Some(expected) = expected.filter(|e| !e.is_none()) else {
            return Some(Matcher::Always);
        };
        if mode == "ignore" {
            return Some(Matcher::Always);
        }
        if !expected.is_exact_instance_of::<PyDict>() {
            return None;
        }
        let d: Py<PyDict> = expected.cast::<PyDict>().ok()?.clone().unbind();
        match mode {
            "exact" => Some(Matcher::Exact(d)),
            "subset" => Some(Matcher::Subset(d)),
            "superset" => Some(Matcher::Superset(d)),
            "numeric" if abs_tol >= 0.0 && rel_tol >= 0.0 => Some(Matcher::Numeric(d, abs_tol, rel_tol)),
            _ => None,
        }
    }

    /// The score of `actual` (a call's arguments), as the Python matcher computes it.
    pub fn score(&self, py: Python<'_>, actual: &Bound<'_, PyDict>) -> Answer<f64> {
        match self {
            Matcher::Always => Ok(1.0),
            Matcher::Exact(e) => union_credit(e.bind(py), actual, deep_eq),
            Matcher::Numeric(e, abs_tol, rel_tol) => {
                let (a, r) = (*abs_tol, *rel_tol);
                union_credit(e.bind(py), actual, move |x, y| numeric_eq(x, y, a, r))
            }
            Matcher::Subset(e) => {
                let e = e.bind(py);
                if e.is_empty() {
                    return Ok(1.0);
                }
                let mut good = 0usize;
                for (k, v) in e.iter() {
                    if let Some(av) = actual.get_item(&k)? {
                        good += usize::from(deep_eq(&v, &av)?);
                    }
                }
                Ok(good as f64 / e.len() as f64)
            }
            Matcher::Superset(e) => {
                let e = e.bind(py);
                if actual.is_empty() {
                    return Ok(1.0);
                }
                let mut good = 0usize;
                for (k, v) in actual.iter() {
                    if let Some(ev) = e.get_item(&k)? {
                        good += usize::from(deep_eq(&ev, &v)?);
                    }
                }
                Ok(good as f64 / actual.len() as f64)
            }
        }
    }
}

/// `_union_credit`: per-key credit over the union of keys.
fn union_credit(
    expected: &Bound<'_, PyDict>,
    actual: &Bound<'_, PyDict>,
    eq: impl Fn(&Bound<'_, PyAny>, &Bound<'_, PyAny>) -> Answer<bool>,
) -> Answer<f64> {
    if expected.is_empty() && actual.is_empty() {
        return Ok(1.0);
    }
    let mut good = 0usize;
    for (k, v) in expected.iter() {
        if let Some(av) = actual.get_item(&k)? {
            good += usize::from(eq(&v, &av)?);
        }
    }
    let mut extra = 0usize;
    for (k, _) in actual.iter() {
        extra += usize::from(!expected.contains(&k)?);
    }
    Ok(good as f64 / (expected.len() + extra) as f64)
}

/// `deep_equal(a, b)`, or None where the kernel declines (for the equality tests).
#[pyfunction]
pub fn deep_equal(a: &Bound<'_, PyAny>, b: &Bound<'_, PyAny>) -> Option<bool> {
    deep_eq(a, b).ok()
}

/// `numeric_equal(a, b, abs_tol, rel_tol)`, or None where the kernel declines.
#[pyfunction]
pub fn numeric_equal(a: &Bound<'_, PyAny>, b: &Bound<'_, PyAny>, abs_tol: f64, rel_tol: f64) -> Option<bool> {
    if abs_tol < 0.0 || rel_tol < 0.0 {
        return None;
    }
    numeric_eq(a, b, abs_tol, rel_tol).ok()
}

/// `match_arguments(expected, actual, mode, abs_tol=…, rel_tol=…)` for the built-in
/// matchers other than regex, or None where the kernel declines.
#[pyfunction]
#[pyo3(signature = (expected, actual, mode, abs_tol, rel_tol))]
pub fn argument_score(
    py: Python<'_>,
    expected: Option<Bound<'_, PyAny>>,
    actual: &Bound<'_, PyAny>,
    mode: &str,
    abs_tol: f64,
    rel_tol: f64,
) -> Option<f64> {
    let matcher = Matcher::build(mode, expected, abs_tol, rel_tol)?;
    let actual = actual.cast_exact::<PyDict>().ok()?;
    matcher.score(py, actual).ok()
}
