//! The crate's one error type. Mapped once to Python exceptions in `py/errors.rs`.
use std::fmt;
use std::path::PathBuf;

pub type Result<T> = std::result::Result<T, Error>;

#[derive(Debug)]
pub enum Error {
    /// The file could not be opened or mapped.
    Io { path: PathBuf, source: std::io::Error },
    /// A GGUF file is malformed: names the file, the byte offset and what is wrong.
    Gguf { path: PathBuf, offset: u64, what: String },
    /// A metadata key the model needs is absent or has the wrong type.
    MissingKey { path: PathBuf, key: String, what: String },
    /// The model's architecture is not implemented.
    UnsupportedArch { path: PathBuf, arch: String, supported: &'static [&'static str] },
    /// A tensor type that has no compute kernel (it can still be inspected).
    UnsupportedTensorType { path: PathBuf, tensor: String, type_name: String },
    /// A required tensor is missing or has the wrong shape.
    Tensor { path: PathBuf, tensor: String, what: String },
    /// The tokenizer metadata is inconsistent.
    Tokenizer(String),
    /// A request is invalid (names the field).
    InvalidRequest(String),
    /// The prompt (plus generation) does not fit the context.
    ContextOverflow { n_tokens: usize, n_ctx: usize },
    /// The caller interrupted the work (Ctrl-C or cancel).
    Cancelled,
    /// The resource is busy right now (a slot processing a request); retry later.
    Unavailable(String),
    /// The feature is switched off or not built in.
    NotSupported(String),
    /// The GPU backend failed (out of device memory, a lost device, a kernel error).
    Gpu(String),
    /// A bug: a panic caught on a request's path (the message says where).
    Internal(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { path, source } => write!(f, "{}: {}", path.display(), source),
            Error::Gguf { path, offset, what } => {
                write!(f, "{}: invalid GGUF file at byte offset {}: {}", path.display(), offset, what)
            }
            Error::MissingKey { path, key, what } => {
                write!(f, "{}: metadata key '{}' {}", path.display(), key, what)
            }
            Error::UnsupportedArch { path, arch, supported } => write!(
                f,
                "{}: unsupported model architecture '{}'; supported architectures: {}",
                path.display(),
                arch,
                supported.join(", ")
            ),
            Error::UnsupportedTensorType { path, tensor, type_name } => write!(
                f,
                "{}: tensor '{}' has type {} which has no compute kernel yet; re-quantize the model to a supported type ({})",
                path.display(),
                tensor,
                type_name,
                crate::quant::GgmlType::supported_names().join(", ")
            ),
            Error::Tensor { path, tensor, what } => {
                write!(f, "{}: tensor '{}': {}", path.display(), tensor, what)
            }
            Error::Tokenizer(m) => write!(f, "tokenizer: {}", m),
            Error::InvalidRequest(m) | Error::Unavailable(m) | Error::NotSupported(m) => write!(f, "{}", m),
            Error::ContextOverflow { n_tokens, n_ctx } => write!(
                f,
                "the request needs {} tokens but the context holds {}; shorten the prompt or raise n_ctx",
                n_tokens, n_ctx
            ),
            Error::Cancelled => write!(f, "generation was cancelled"),
            Error::Gpu(m) => write!(f, "GPU: {}", m),
            Error::Internal(m) => write!(f, "internal error: {}", m),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl Error {
    /// The same error again (one failure reported to several requests): same kind, same
    /// message.
    pub fn again(&self) -> Error {
        match self {
            Error::Io { path, source } => Error::Io { path: path.clone(), source: std::io::Error::new(source.kind(), source.to_string()) },
            Error::Gguf { path, offset, what } => Error::Gguf { path: path.clone(), offset: *offset, what: what.clone() },
            Error::MissingKey { path, key, what } => Error::MissingKey { path: path.clone(), key: key.clone(), what: what.clone() },
            Error::UnsupportedArch { path, arch, supported } => Error::UnsupportedArch { path: path.clone(), arch: arch.clone(), supported },
            Error::UnsupportedTensorType { path, tensor, type_name } => {
                Error::UnsupportedTensorType { path: path.clone(), tensor: tensor.clone(), type_name: type_name.clone() }
            }
            Error::Tensor { path, tensor, what } => Error::Tensor { path: path.clone(), tensor: tensor.clone(), what: what.clone() },
            Error::Tokenizer(m) => Error::Tokenizer(m.clone()),
            Error::InvalidRequest(m) => Error::InvalidRequest(m.clone()),
            Error::ContextOverflow { n_tokens, n_ctx } => Error::ContextOverflow { n_tokens: *n_tokens, n_ctx: *n_ctx },
            Error::Cancelled => Error::Cancelled,
            Error::Unavailable(m) => Error::Unavailable(m.clone()),
            Error::NotSupported(m) => Error::NotSupported(m.clone()),
            Error::Gpu(m) => Error::Gpu(m.clone()),
            Error::Internal(m) => Error::Internal(m.clone()),
        }
    }

    /// A caught panic's payload as an `Internal` error naming where it happened.
    pub fn from_panic(payload: Box<dyn std::any::Any + Send>, place: &str) -> Error {
        let msg = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic with no message".into());
        Error::Internal(format!("{place} failed: {msg}"))
    }
}
