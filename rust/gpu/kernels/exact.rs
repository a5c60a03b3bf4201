//! Which fused multiply-add the kernels use (exact.wgsl `fmaf`): WGSL's `fma` may round
//! twice (Vulkan lets a driver split it; Mesa's lavapipe does), and the CPU path's bits
//! need one rounding. When the device is opened, both the device's `fma` and the
//! error-free emulation run on cases where one and two roundings differ; the device's is
//! used when it matches `f32::mul_add` on all of them, else the emulation when that does.
use super::{COMMON, EXACT};
use crate::error::{Error, Result};
use wgpu::util::DeviceExt;

/// (a, b, c) triples where a·b + c rounded once and twice differ often: products of
/// scales and integer sums (the matrix chains), cancellations, and small magnitudes.
fn cases() -> Vec<[f32; 3]> {
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    let mut r = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
    };
    (0..4096)
        .map(|i| {
            let (a, b, c) = (r() * 4.0, (r() * 10000.0).round(), r() * 100.0);
            match i % 3 {
                0 => [a, b, c],
                1 => [a, b, -(a * b) * (1.0 + r() * 1e-6)],
                _ => [a * 1e-3, r(), r() * 1e-3],
            }
        })
        .collect()
}

/// (the device's `fma` rounds once, the emulation does) on every probe case.
pub fn probe(device: &wgpu::Device, queue: &wgpu::Queue) -> Result<(bool, bool)> {
    let cases = cases();
    let n = cases.len();
    let src = format!(
        "{COMMON}\n{EXACT}\nfn fmaf(a: f32, b: f32, c: f32) -> f32 {{\n    return fma(a, b, c);\n}}\n\
         @group(0) @binding(0) var<storage, read> A: array<f32>;\n\
         @group(0) @binding(1) var<storage, read_write> O: array<f32>;\n\
         @group(0) @binding(2) var<uniform> S: Step;\n\
         @compute @workgroup_size(64)\n\
         fn probe(@builtin(global_invocation_id) gid: vec3<u32>) {{\n\
             let i = gid.x;\n\
             if (i >= arrayLength(&A) / 3u) {{\n        return;\n    }}\n\
             O[2u * i] = fma(A[3u * i], A[3u * i + 1u], A[3u * i + 2u]);\n\
             O[2u * i + 1u] = fma_emulated(A[3u * i], A[3u * i + 1u], A[3u * i + 2u]);\n\
         }}\n"
    );
    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor { label: Some("fma probe"), source: wgpu::ShaderSource::Wgsl(src.into()) });
    let pipe = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some("fma probe"),
        layout: None,
        module: &module,
        entry_point: Some("probe"),
        compilation_options: Default::default(),
        cache: None,
    });
    let input: Vec<f32> = cases.iter().flatten().copied().collect();
    let usage = wgpu::BufferUsages::STORAGE;
    let a = device.create_buffer_init(&wgpu::util::BufferInitDescriptor { label: Some("fma probe in"), contents: bytemuck::cast_slice(&input), usage });
    let step = device.create_buffer_init(&wgpu::util::BufferInitDescriptor { label: Some("fma probe step"), contents: &[1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], usage: wgpu::BufferUsages::UNIFORM });
    let bytes = (2 * n * 4) as u64;
    let o = device.create_buffer(&wgpu::BufferDescriptor { label: Some("fma probe out"), size: bytes, usage: usage | wgpu::BufferUsages::COPY_SRC, mapped_at_creation: false });
    let rb = device.create_buffer(&wgpu::BufferDescriptor { label: Some("fma probe read"), size: bytes, usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST, mapped_at_creation: false });
    let bgl = pipe.get_bind_group_layout(0);
    let entries = [
        wgpu::BindGroupEntry { binding: 0, resource: a.as_entire_binding() },
        wgpu::BindGroupEntry { binding: 1, resource: o.as_entire_binding() },
        wgpu::BindGroupEntry { binding: 2, resource: step.as_entire_binding() },
    ];
    let bind = device.create_bind_group(&wgpu::BindGroupDescriptor { label: None, layout: &bgl, entries: &entries });
    let mut enc = device.create_command_encoder(&Default::default());
    {
        let mut pass = enc.begin_compute_pass(&Default::default());
        pass.set_pipeline(&pipe);
        pass.set_bind_group(0, &bind, &[]);
        pass.dispatch_workgroups((n as u32).div_ceil(64), 1, 1);
    }
    enc.copy_buffer_to_buffer(&o, 0, &rb, 0, bytes);
    queue.submit([enc.finish()]);
    let (tx, rx) = std::sync::mpsc::channel();
    rb.slice(..).map_async(wgpu::MapMode::Read, move |r| {
        let _ = tx.send(r);
    });
    device.poll(wgpu::PollType::wait_indefinitely()).map_err(|e| Error::Gpu(format!("the FMA probe did not finish: {e}")))?;
    match rx.recv() {
        Ok(Ok(())) => {}
        _ => return Err(Error::Gpu("the FMA probe's results could not be read".into())),
    }
    let view = rb.slice(..).get_mapped_range().map_err(|e| Error::Gpu(format!("the FMA probe's results could not be mapped: {e}")))?;
    let out: &[u32] = bytemuck::cast_slice(&view);
    let (mut native, mut emulated) = (true, true);
    for (i, [x, y, z]) in cases.iter().enumerate() {
        let want = x.mul_add(*y, *z).to_bits();
        native &= out[2 * i] == want;
        emulated &= out[2 * i + 1] == want;
    }
    Ok((native, emulated))
}
