//! tracepass's compiled evaluation core (`tracepass._evaluator_core`).
//!
//! What it computes is defined by the pure-Python modules of `tracepass.evaluator.scoring`
//! (the reference implementation and the fallback; `tracepass.evaluator.native_core`
//! decides which path runs). Every kernel here either returns exactly what its Python
//! counterpart returns or declines (`None`), and the caller then runs the Python code:
//! declining is how the kernels stay exact on inputs they do not model (objects that are
//! not plain JSON values, groups Python hands to scipy).

pub mod kernels;

#[cfg(feature = "python")]
mod argmatch;
#[cfg(feature = "python")]
mod pairing;

#[cfg(feature = "python")]
mod module {
    use pyo3::prelude::*;

    #[pymodule]
    fn _evaluator_core(m: &Bound<'_, PyModule>) -> PyResult<()> {
        let py = m.py();
        let neumaier = py.version_info() >= (3, 12);
        crate::pairing::set_sum_mode(neumaier);
        m.add("__version__", env!("CARGO_PKG_VERSION"))?;
        // What `tracepass.evaluator.native_core` checks before using the module: a
        // stale build (another kernel interface) is not used.
        m.add("API", 1)?;
        m.add("SUM_MODE", if neumaier { "neumaier" } else { "naive" })?;
        m.add_class::<crate::pairing::NativeTurn>()?;
        m.add_function(wrap_pyfunction!(crate::argmatch::deep_equal, m)?)?;
        m.add_function(wrap_pyfunction!(crate::argmatch::numeric_equal, m)?)?;
        m.add_function(wrap_pyfunction!(crate::argmatch::argument_score, m)?)?;
        Ok(())
    }
}
