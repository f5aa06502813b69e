//! A graph on one CPU device, its result copied to another, read back:
//! the README's library example. `cargo run --release --example two_devices -p baton-cpu`
use std::sync::Arc;

use baton_core::backend::{Bindings, Device};
use baton_core::graph::{Flags, Graph};
use baton_core::DType;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Two CPU devices, each with its own cores, threads and memory.
    let devices = baton_cpu::open(&["cpu:0", "cpu:1"])?;
    let (s0, s1) = (devices[0].new_stream()?, devices[1].new_stream()?);

    // y = 2x on device 0 ...
    let mut g = Graph::new();
    let x = g.leaf("x", DType::F32, &[4], Flags::INPUT)?;
    let y = g.scale(x, 2.0)?;
    g.mark(y, Flags::OUTPUT)?;
    g.set_name(y, "y")?;
    let g = Arc::new(g);
    let xt = devices[0].alloc_tensor(DType::F32, &[4])?;
    let yt = devices[0].alloc_tensor(DType::F32, &[4])?;
    let mut b = Bindings::new(&g);
    b.bind_name("x", xt.clone())?.bind_name("y", yt.clone())?;
    let write = s0.write_async(&xt, vec![1f32, 2.0, 3.0, 4.0])?; // the stream owns the Vec now
    let done = s0.compute(b)?; // returns at once: a SyncPoint

    // ... then copied to device 1, which waits on device 0's point without
    // blocking the host.
    let zt = devices[1].alloc_tensor(DType::F32, &[4])?;
    s1.copy(&yt, &zt, Some(&done))?;
    let read = s1.read_into_async(&zt, vec![0f32; 4])?;
    let result = read.wait()?; // waits for its own point only
    assert_eq!(result, vec![2.0, 4.0, 6.0, 8.0]);
    let _reused = write.wait()?; // the buffer comes back
    println!("{} -> {} -> host: {result:?}", s0.label(), s1.label());
    Ok(())
}
