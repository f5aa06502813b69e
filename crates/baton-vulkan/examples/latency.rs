//! Prints the median latencies of a Vulkan device's sync primitives:
//! `cargo run --release -p baton-vulkan --example latency [-- vulkan:N]`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let name = std::env::args().nth(1).unwrap_or_else(|| "vulkan:0".into());
    let device = baton_vulkan::open(&[name.as_str()])?.remove(0);
    let l = baton_vulkan::latency::measure(&device, 300)?;
    let us = |ns: u64| ns as f64 / 1000.0;
    println!("{name}: {}", baton_core::backend::Device::info(&*device).description);
    println!("host signal -> waiting thread wakes  {:8.1} us", us(l.host_signal_to_wake_ns));
    println!("empty submit -> semaphore wait ends  {:8.1} us", us(l.submit_to_wait_ns));
    println!("stream host item, queued -> observed {:8.1} us", us(l.host_item_ns));
    println!("stream device copy, queued -> observed {:6.1} us", us(l.device_item_ns));
    println!("release -> native wait -> observed   {:8.1} us", us(l.native_handoff_ns));
    println!("device fence: host write -> batch done {:6.1} us", us(l.fence_release_to_done_ns));
    Ok(())
}
