//! Errors are typed values, never panics: bad names, memory the device
//! cannot give, and work the device cannot do fail the stream (sticky).

use std::sync::Arc;

use baton_core::backend::{Bindings, Device, DeviceError, StreamError};
use baton_core::graph::{Flags, Graph};
use baton_core::DType;
use baton_testkit::env::vulkan_required;
use baton_vulkan::VulkanError;

fn device() -> Option<Arc<baton_vulkan::VulkanDevice>> {
    match baton_vulkan::open(&["vulkan:0"]) {
        Ok(mut d) => Some(d.remove(0)),
        Err(e) if e.is_unavailable() && !vulkan_required() => {
            eprintln!("skipped: {e}");
            None
        }
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn bad_device_names_are_typed_errors() {
    assert!(matches!(baton_vulkan::parse_name("vulkan:x"), Err(VulkanError::BadName { .. })));
    assert!(matches!(baton_vulkan::parse_name("cpu:0"), Err(VulkanError::BadName { .. })));
    assert_eq!(baton_vulkan::parse_name("vulkan").ok(), Some(0));
    assert_eq!(baton_vulkan::parse_name("vulkan:3").ok(), Some(3));
    if device().is_none() {
        return;
    }
    match baton_vulkan::open(&["vulkan:999"]) {
        Err(VulkanError::Unknown { available, .. }) => assert!(available.contains("vulkan:0"), "{available}"),
        Err(e) => panic!("expected Unknown, got {e}"),
        Ok(_) => panic!("vulkan:999 opened"),
    }
    baton_vulkan::validation::assert_clean();
}

#[test]
fn memory_the_device_cannot_give_is_an_error() {
    let Some(d) = device() else { return };
    match d.alloc(1 << 42) {
        Err(DeviceError::OutOfMemory { bytes, .. }) => assert_eq!(bytes, 1 << 42),
        other => panic!("expected OutOfMemory, got {other:?}"),
    }
    drop(d);
    baton_vulkan::validation::assert_clean();
}

/// A graph bound to CPU memory cannot run on the device (its shaders bind
/// only device memory, `RawStream::can_compute_on`): the computation is
/// refused at submission with a typed error, and the stream, which queued
/// nothing, works on.
#[test]
fn a_computation_on_memory_the_device_cannot_bind_is_refused_at_submission() {
    let Some(d) = device() else { return };
    let cpu =
        baton_cpu::open_with(&["cpu"], &baton_cpu::OpenOptions::default().with_threads(1)).expect("cpu").remove(0);
    let s = d.new_stream().expect("stream");
    let mut g = Graph::new();
    let x = g.leaf("x", DType::F32, &[4], Flags::INPUT).expect("leaf");
    let y = g.scale(x, 2.0).expect("scale");
    g.mark(y, Flags::OUTPUT).expect("mark");
    g.set_name(y, "y").expect("name");
    let g = Arc::new(g);
    let on_cpu = cpu.alloc_tensor(DType::F32, &[4]).expect("alloc");
    let on_gpu = d.alloc_tensor(DType::F32, &[4]).expect("alloc");
    let mut b = Bindings::new(&g);
    b.bind_name("x", on_cpu).expect("x").bind_name("y", on_gpu.clone()).expect("y");
    match s.compute(b) {
        Err(StreamError::InaccessibleBuffer { device, .. }) => assert_eq!(device, "cpu"),
        Err(other) => panic!("expected InaccessibleBuffer, got {other}"),
        Ok(point) => panic!("a computation bound to CPU memory was queued ({point})"),
    }
    let back = s.write_async(&on_gpu, vec![1f32; 4]).expect("the stream works on").wait().expect("write");
    assert_eq!(back, vec![1f32; 4]);
    drop((s, d, on_gpu));
    baton_vulkan::validation::assert_clean();
}
