//! The only PyO3 code: the `llamars._core` module.
mod engine;
mod errors;
mod fields;
mod misc;
mod request;

use pyo3::prelude::*;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    errors::register(m)?;
    m.add_class::<engine::PyEngine>()?;
    m.add_class::<request::PyRequest>()?;
    m.add_class::<request::PyHub>()?;
    m.add_class::<fields::PyGenerationRequest>()?;
    m.add_function(wrap_pyfunction!(fields::generation_fields, m)?)?;
    m.add_function(wrap_pyfunction!(misc::inspect, m)?)?;
    m.add_function(wrap_pyfunction!(misc::memory_plan, m)?)?;
    m.add_function(wrap_pyfunction!(misc::dequantize, m)?)?;
    m.add_function(wrap_pyfunction!(misc::vec_dot, m)?)?;
    m.add_function(wrap_pyfunction!(misc::isa, m)?)?;
    m.add_function(wrap_pyfunction!(misc::harden_json_schema, m)?)?;
    m.add_function(wrap_pyfunction!(misc::list_devices, m)?)?;
    m.add_function(wrap_pyfunction!(misc::gpu_built, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
