//! Adapters and the opened device: enumeration (`--list-devices`), choice (`--device`,
//! `--main-gpu`), limits asked of the adapter, and errors caught in scopes so a failed
//! allocation or a bad shader is a typed error, not a lost device.
use super::kernels::Pipelines;
use super::DeviceInfo;
use crate::error::{Error, Result};
use std::sync::{Arc, OnceLock};

pub struct Gpu {
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub info: DeviceInfo,
    pub limits: wgpu::Limits,
    pub pipes: Pipelines,
    /// WGSL's packed 4×i8 dot product (`dot4I8Packed`, DP4a where the GPU has it) is
    /// available; otherwise the kernels unpack and multiply.
    pub dp4a: bool,
    /// WGSL's `fma` rounds once on this device (else the kernels emulate it; kernels/exact.rs).
    pub fma_native: bool,
    /// `fmaf` rounds once (natively or emulated): the kernels compute the CPU path's bits.
    pub fma_exact: bool,
    /// WGSL's f16 type (SHADER_F16): the attention reads the f16 KV cache as f16 arrays;
    /// otherwise it unpacks words (`unpack2x16float`), the same values.
    pub f16: bool,
}

fn instance() -> &'static wgpu::Instance {
    static I: OnceLock<wgpu::Instance> = OnceLock::new();
    I.get_or_init(|| {
        let mut d = wgpu::InstanceDescriptor::new_without_display_handle_from_env();
        // Compute runs on Vulkan, Metal or DX12 only (`adapters`); leaving GL out of the
        // instance also keeps its EGL probing (which connects to Wayland and complains on
        // stderr when there is no display session) out of every start. WGPU_BACKEND wins.
        if std::env::var_os("WGPU_BACKEND").is_none() {
            d.backends = wgpu::Backends::VULKAN | wgpu::Backends::METAL | wgpu::Backends::DX12;
        }
        // Refuse a resource that would take the device past 95% of its memory budget
        // (an out-of-memory error we can report) instead of losing the device.
        d.memory_budget_thresholds = wgpu::MemoryBudgetThresholds { for_resource_creation: Some(95), for_device_loss: None };
        wgpu::Instance::new(d)
    })
}

fn backend_name(b: wgpu::Backend) -> &'static str {
    match b {
        wgpu::Backend::Vulkan => "Vulkan",
        wgpu::Backend::Metal => "Metal",
        wgpu::Backend::Dx12 => "DX12",
        wgpu::Backend::Gl => "GL",
        _ => "GPU",
    }
}

fn kind_name(t: wgpu::DeviceType) -> &'static str {
    match t {
        wgpu::DeviceType::DiscreteGpu => "discrete",
        wgpu::DeviceType::IntegratedGpu => "integrated",
        wgpu::DeviceType::VirtualGpu => "virtual",
        wgpu::DeviceType::Cpu => "cpu",
        wgpu::DeviceType::Other => "other",
    }
}

/// Every compute-capable adapter, named like llama.cpp's devices (`Vulkan0`, `Metal0`, …).
fn adapters() -> Vec<(DeviceInfo, wgpu::Adapter)> {
    let all = pollster::block_on(instance().enumerate_adapters(wgpu::Backends::VULKAN | wgpu::Backends::METAL | wgpu::Backends::DX12));
    let mut per_backend: std::collections::HashMap<&'static str, usize> = Default::default();
    let mut out = Vec::new();
    for a in all {
        let i = a.get_info();
        let b = backend_name(i.backend);
        let n = per_backend.entry(b).or_insert(0);
        let l = a.limits();
        out.push((
            DeviceInfo {
                name: format!("{b}{n}"),
                description: i.name.clone(),
                backend: b.to_string(),
                kind: kind_name(i.device_type).to_string(),
                driver: format!("{} {}", i.driver, i.driver_info).trim().to_string(),
                max_buffer_bytes: l.max_buffer_size,
                max_binding_bytes: l.max_storage_buffer_binding_size,
                shader_f16: a.features().contains(wgpu::Features::SHADER_F16),
                memory_bytes: device_memory(&a),
            },
            a,
        ));
        *n += 1;
    }
    out
}

/// Device-local memory of an adapter: the sum of Vulkan's DEVICE_LOCAL heaps; for a
/// software adapter (its memory is the system's) what the system can still hand out.
fn device_memory(a: &wgpu::Adapter) -> Option<u64> {
    if a.get_info().device_type == wgpu::DeviceType::Cpu {
        return crate::kv_cache::available_memory();
    }
    #[cfg(not(any(target_os = "macos", target_os = "ios")))]
    {
        // SAFETY: the hal adapter is only read (its physical device's memory properties)
        // while `a` keeps it alive; nothing is created or destroyed through it.
        let hal = unsafe { a.as_hal::<wgpu::hal::api::Vulkan>() }?;
        let props = unsafe { hal.shared_instance().raw_instance().get_physical_device_memory_properties(hal.raw_physical_device()) };
        let n = (props.memory_heap_count as usize).min(props.memory_heaps.len());
        let local: u64 = props.memory_heaps[..n].iter().filter(|h| h.flags.contains(ash::vk::MemoryHeapFlags::DEVICE_LOCAL)).map(|h| h.size).sum();
        if local > 0 {
            return Some(local);
        }
    }
    None
}

pub fn list_devices() -> Vec<DeviceInfo> {
    adapters().into_iter().map(|(d, _)| d).collect()
}

/// Open the adapter named `name` (case-insensitive), or the best GPU when `name` is None:
/// discrete, then integrated, virtual, other; `main_gpu` indexes that ranked list. Software
/// adapters (`kind == "cpu"`, e.g. Mesa's lavapipe) are used only when named.
pub fn open(name: Option<&str>, main_gpu: usize) -> Result<Option<Gpu>> {
    let mut all = adapters();
    let pick = match name {
        Some(n) => {
            let i = all.iter().position(|(d, _)| d.name.eq_ignore_ascii_case(n)).ok_or_else(|| {
                let names: Vec<String> = all.iter().map(|(d, _)| d.name.clone()).collect();
                Error::InvalidRequest(format!(
                    "device: no device named '{n}'; available: {} (see --list-devices)",
                    if names.is_empty() { "none".to_string() } else { names.join(", ") }
                ))
            })?;
            all.swap_remove(i)
        }
        None => {
            let rank = |k: &str| match k {
                "discrete" => 0,
                "integrated" => 1,
                "virtual" => 2,
                _ => 3,
            };
            let mut gpus: Vec<_> = all.into_iter().filter(|(d, _)| d.kind != "cpu").collect();
            gpus.sort_by_key(|(d, _)| rank(&d.kind));
            if gpus.is_empty() {
                return Ok(None);
            }
            if main_gpu >= gpus.len() {
                return Err(Error::InvalidRequest(format!("main_gpu: {main_gpu} is out of range ({} GPU(s) found)", gpus.len())));
            }
            gpus.swap_remove(main_gpu)
        }
    };
    let (info, adapter) = pick;
    let al = adapter.limits();
    // Large storage bindings (embedding matrices) and the most storage buffers per stage.
    let limits = wgpu::Limits {
        max_storage_buffer_binding_size: al.max_storage_buffer_binding_size,
        max_buffer_size: al.max_buffer_size,
        max_storage_buffers_per_shader_stage: al.max_storage_buffers_per_shader_stage.min(16),
        max_compute_workgroup_storage_size: al.max_compute_workgroup_storage_size,
        ..wgpu::Limits::downlevel_defaults()
    };
    let features = adapter.features() & wgpu::Features::SHADER_F16;
    let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
        label: Some("llamars"),
        required_features: features,
        required_limits: limits.clone(),
        experimental_features: wgpu::ExperimentalFeatures::disabled(),
        memory_hints: wgpu::MemoryHints::Performance,
        trace: wgpu::Trace::Off,
    }))
    .map_err(|e| Error::Gpu(format!("{} ({}): the device could not be opened: {e}", info.name, info.description)))?;
    let dp4a = instance().wgsl_language_features().contains(wgpu::WgslLanguageFeatures::Packed4x8IntegerDotProduct)
        && std::env::var("LLAMARS_GPU_NO_DP4A").is_err();
    let (native, emulated) = super::kernels::exact::probe(&device, &queue)?;
    if !native && !emulated {
        eprintln!("llamars: {}: neither its fma nor its emulation rounds once; GPU results will differ from the CPU path in the last bits", info.name);
    }
    let (fma_native, fma_exact) = (native || !emulated, native || emulated);
    let f16 = features.contains(wgpu::Features::SHADER_F16) && std::env::var("LLAMARS_GPU_NO_F16").is_err();
    Ok(Some(Gpu { device, queue, info, limits, pipes: Pipelines::default(), dp4a, fma_native, fma_exact, f16 }))
}

impl Gpu {
    /// Run `f` with out-of-memory and validation errors captured, as `Error::Gpu` naming `what`.
    pub fn checked<T>(&self, what: &str, f: impl FnOnce() -> T) -> Result<T> {
        let oom = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let val = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let out = f();
        let v = pollster::block_on(val.pop());
        let o = pollster::block_on(oom.pop());
        if let Some(e) = o {
            return Err(Error::Gpu(format!(
                "{}: out of device memory while {what} ({e}); offload fewer layers (-ngl) or lower the context size",
                self.info.name
            )));
        }
        if let Some(e) = v {
            return Err(Error::Gpu(format!("{}: {what} failed: {e}", self.info.name)));
        }
        Ok(out)
    }

    /// A storage buffer holding `data` (padded to 4 bytes), usable as a copy source and target.
    pub fn upload(&self, what: &str, data: &[u8]) -> Result<wgpu::Buffer> {
        let size = (data.len().max(4).div_ceil(4) * 4) as u64;
        if size > self.limits.max_buffer_size {
            return Err(Error::Gpu(format!("{}: {what} needs one buffer of {size} bytes, over the device's limit of {}", self.info.name, self.limits.max_buffer_size)));
        }
        self.checked(&format!("uploading {what}"), || {
            let b = self.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(what),
                size,
                usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: true,
            });
            {
                if let Ok(mut view) = b.slice(..).get_mapped_range_mut() {
                    view.slice(..data.len()).copy_from_slice(data);
                }
            }
            b.unmap();
            b
        })
    }

    /// A zeroed storage buffer of `bytes` (at least 4).
    pub fn zeros(&self, what: &str, bytes: u64) -> Result<wgpu::Buffer> {
        let size = bytes.max(4).div_ceil(4) * 4;
        if size > self.limits.max_buffer_size {
            return Err(Error::Gpu(format!("{}: {what} needs one buffer of {size} bytes, over the device's limit of {}", self.info.name, self.limits.max_buffer_size)));
        }
        self.checked(&format!("allocating {what}"), || {
            self.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(what),
                size,
                usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: false,
            })
        })
    }

    /// Copy `len` bytes of `src` from `offset` back to the host.
    pub fn read(&self, src: &wgpu::Buffer, offset: u64, len: u64, out: &mut [u8]) -> Result<()> {
        let mut enc = self.device.create_command_encoder(&Default::default());
        let staging = self.staging(len)?;
        enc.copy_buffer_to_buffer(src, offset, &staging, 0, len.div_ceil(4) * 4);
        self.queue.submit([enc.finish()]);
        self.map_into(&staging, len, out)
    }

    pub fn staging(&self, len: u64) -> Result<wgpu::Buffer> {
        self.checked("allocating a read-back buffer", || {
            self.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("readback"),
                size: len.max(4).div_ceil(4) * 4,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        })
    }

    /// Wait for submitted work, then copy the first `len` bytes of mapped `staging` into `out`.
    pub fn map_into(&self, staging: &wgpu::Buffer, len: u64, out: &mut [u8]) -> Result<()> {
        let (tx, rx) = std::sync::mpsc::channel();
        staging.slice(..).map_async(wgpu::MapMode::Read, move |r| {
            let _ = tx.send(r);
        });
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| Error::Gpu(format!("{}: waiting for the device failed: {e}", self.info.name)))?;
        match rx.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(Error::Gpu(format!("{}: reading results back failed: {e}", self.info.name))),
            Err(_) => return Err(Error::Gpu(format!("{}: the device was lost while reading results back", self.info.name))),
        }
        {
            let view = staging.slice(..).get_mapped_range().map_err(|e| Error::Gpu(format!("{}: mapping results failed: {e}", self.info.name)))?;
            out[..len as usize].copy_from_slice(&view[..len as usize]);
        }
        staging.unmap();
        Ok(())
    }
}

/// The device shared by every model that asks for the same adapter in this process.
pub fn shared(name: Option<&str>, main_gpu: usize) -> Result<Option<Arc<Gpu>>> {
    static OPEN: std::sync::Mutex<Vec<(String, std::sync::Weak<Gpu>)>> = std::sync::Mutex::new(Vec::new());
    let key = format!("{}#{main_gpu}", name.unwrap_or("").to_ascii_lowercase());
    let mut table = OPEN.lock().map_err(|_| Error::Gpu("device table poisoned".into()))?;
    table.retain(|(_, w)| w.strong_count() > 0);
    if let Some(g) = table.iter().find(|(k, _)| *k == key).and_then(|(_, w)| w.upgrade()) {
        return Ok(Some(g));
    }
    let g = match open(name, main_gpu)? {
        Some(g) => Arc::new(g),
        None => return Ok(None),
    };
    table.push((key, Arc::downgrade(&g)));
    Ok(Some(g))
}
