//! GPU compute through wgpu (feature `wgpu`): WGSL kernels for every tensor type the CPU
//! supports, layer offload with a device-resident KV cache, and device selection.
//! Built without the feature, `stub.rs` provides the same names: listing finds no
//! device and offloading is a typed `NotSupported` error, so the engine runs on the CPU.
//!
//! | file | holds |
//! |---|---|
//! | `device.rs` | adapters, the opened device, limits, error scopes, upload/read-back |
//! | `kernels/` | one `.wgsl` per kernel family with its Rust wrapper beside it |
//! | `offload.rs` | the offloaded layers' weights, uploaded as their steps (`model::plan`) name them |
//! | `kv_device.rs` | the device half of a KV cache |
//! | `acts.rs` | a session's activation buffers (named `Slot`s) and its encoded plan |
//! | `step.rs` | the plan built from the layers' steps, and one forward step run on it |
//! | `placement.rs` | memory needed per layer count, `-ngl`/`auto`, the check before upload |
#[cfg(feature = "wgpu")]
pub mod device;
#[cfg(feature = "wgpu")]
pub mod kernels;
#[cfg(feature = "wgpu")]
mod acts;
#[cfg(feature = "wgpu")]
mod kv_device;
#[cfg(feature = "wgpu")]
mod offload;
#[cfg(feature = "wgpu")]
mod placement;
#[cfg(feature = "wgpu")]
mod step;
#[cfg(feature = "wgpu")]
pub use acts::Acts;
#[cfg(feature = "wgpu")]
pub use kv_device::KvDevice;
#[cfg(feature = "wgpu")]
pub use offload::Offload;
#[cfg(feature = "wgpu")]
pub use placement::{attach, bytes_needed};
#[cfg(all(test, feature = "wgpu"))]
mod tests;

#[cfg(not(feature = "wgpu"))]
mod stub;
#[cfg(not(feature = "wgpu"))]
pub use stub::*;

/// Where a forward step's input comes from.
pub enum StepIo<'a> {
    /// [n, n_embd] activations computed on the CPU (the first device layer's input)
    Hidden(&'a [f32]),
    /// token ids looked up on the device
    Tokens,
}

/// Whether this build has the wgpu backend.
pub const BUILT: bool = cfg!(feature = "wgpu");

/// One adapter as `--list-devices` shows it.
#[derive(Debug, Clone)]
pub struct DeviceInfo {
    /// `Vulkan0`, `Metal0`, …: what `--device` takes.
    pub name: String,
    /// The adapter's own name.
    pub description: String,
    pub backend: String,
    /// discrete, integrated, virtual, cpu (software) or other
    pub kind: String,
    pub driver: String,
    pub max_buffer_bytes: u64,
    pub max_binding_bytes: u64,
    pub shader_f16: bool,
    /// Device-local memory in bytes (Vulkan heaps; system memory for software adapters),
    /// when the backend says.
    pub memory_bytes: Option<u64>,
}

/// Every adapter wgpu finds (none when built without the feature).
pub fn list_devices() -> Vec<DeviceInfo> {
    #[cfg(feature = "wgpu")]
    {
        device::list_devices()
    }
    #[cfg(not(feature = "wgpu"))]
    {
        Vec::new()
    }
}

/// What the caller asked for: `n_gpu_layers` (-1 = auto: everything when a GPU is
/// found), a device name (`none` = no offload), and the index among GPUs when unnamed.
#[derive(Debug, Clone, Default)]
pub struct GpuConfig {
    pub n_gpu_layers: i64,
    pub device: Option<String>,
    pub main_gpu: usize,
    /// KV positions and batch size the engine will use (for the memory estimate).
    pub n_ctx: usize,
    pub n_batch: usize,
}

/// Layers llama.cpp would offload for `n_gpu_layers` on a model of `n_layer` layers
/// (the output layer counts as one): min(n, n_layer + 1); auto (-1) = all.
pub fn layers_to_offload(n_gpu_layers: i64, n_layer: usize) -> usize {
    if n_gpu_layers < 0 {
        n_layer + 1
    } else {
        (n_gpu_layers as u64).min(n_layer as u64 + 1) as usize
    }
}
