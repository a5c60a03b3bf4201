//! The one table from `crate::Error` to Python exceptions (rooted at LlamarsError).
use crate::error::Error;
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(_core, LlamarsError, PyException, "Base class of every llamars error.");
create_exception!(_core, ModelLoadError, LlamarsError, "The model file could not be opened, parsed or bound.");
create_exception!(_core, TokenizerError, LlamarsError, "The model's tokenizer metadata is unusable.");
create_exception!(_core, InvalidRequestError, LlamarsError, "A request parameter is invalid (the message names it).");
create_exception!(_core, ContextOverflowError, LlamarsError, "The request does not fit in the context window.");
create_exception!(_core, CancelledError, LlamarsError, "The generation was cancelled.");
create_exception!(_core, UnavailableError, LlamarsError, "The resource is busy right now (e.g. a slot processing a request); retry later.");
create_exception!(_core, NotSupportedError, LlamarsError, "The feature is switched off or not available in this build.");
create_exception!(_core, GpuError, LlamarsError, "The GPU backend failed (out of device memory, a lost device, a kernel error).");
create_exception!(_core, InternalError, LlamarsError, "A bug in llamars caught on a request's path (the request failed; the engine keeps serving).");

pub fn to_py(e: Error) -> PyErr {
    let msg = e.to_string();
    match e {
        Error::Io { .. }
        | Error::Gguf { .. }
        | Error::MissingKey { .. }
        | Error::UnsupportedArch { .. }
        | Error::UnsupportedTensorType { .. }
        | Error::Tensor { .. } => ModelLoadError::new_err(msg),
        Error::Tokenizer(_) => TokenizerError::new_err(msg),
        Error::InvalidRequest(_) => InvalidRequestError::new_err(msg),
        Error::ContextOverflow { n_tokens, n_ctx } => Python::attach(|py| {
            // the counts travel as attributes too: llama-server's error body carries them
            let err = ContextOverflowError::new_err(msg);
            let v = err.value(py);
            let _ = v.setattr("n_prompt_tokens", n_tokens);
            let _ = v.setattr("n_ctx", n_ctx);
            err
        }),
        Error::Cancelled => CancelledError::new_err(msg),
        Error::Unavailable(_) => UnavailableError::new_err(msg),
        Error::NotSupported(_) => NotSupportedError::new_err(msg),
        Error::Gpu(_) => GpuError::new_err(msg),
        Error::Internal(_) => InternalError::new_err(msg),
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("LlamarsError", py.get_type::<LlamarsError>())?;
    m.add("ModelLoadError", py.get_type::<ModelLoadError>())?;
    m.add("TokenizerError", py.get_type::<TokenizerError>())?;
    m.add("InvalidRequestError", py.get_type::<InvalidRequestError>())?;
    m.add("ContextOverflowError", py.get_type::<ContextOverflowError>())?;
    m.add("CancelledError", py.get_type::<CancelledError>())?;
    m.add("UnavailableError", py.get_type::<UnavailableError>())?;
    m.add("NotSupportedError", py.get_type::<NotSupportedError>())?;
    m.add("GpuError", py.get_type::<GpuError>())?;
    m.add("InternalError", py.get_type::<InternalError>())?;
    Ok(())
}
