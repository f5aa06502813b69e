//! Process exit waits for stream workers still draining their queues: a
//! child run of this test binary queues a slow host function on a Vulkan
//! stream, drops the stream (which does not block, `D-NOBLOCK`) and lets
//! the process exit at once; the host function must still have run to its
//! end, and the child must exit cleanly (not crash in the driver's
//! teardown while the worker is inside a Vulkan call).

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

/// Where the child writes its mark; set only in the child.
const MARK_VAR: &str = "BATON_TEST_EXIT_MARK";

#[test]
fn exit_waits_for_a_stream_worker_to_finish_its_queue() {
    let Some(_probe) = super::vulkan() else { return };
    let mark = std::env::temp_dir().join(format!("baton-exit-mark-{}", std::process::id()));
    let _ = std::fs::remove_file(&mark);
    let output = Command::new(std::env::current_exe().expect("test binary"))
        .args(["exit::child_queues_slow_work_then_exits", "--exact", "--nocapture", "--test-threads=1"])
        .env(MARK_VAR, &mark)
        .output()
        .expect("running the child");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "child exited with {:?}: {stderr}", output.status);
    let written = std::fs::read_to_string(&mark).unwrap_or_default();
    let _ = std::fs::remove_file(&mark);
    assert_eq!(written, "done", "the queued host function ran to its end before exit; child: {stderr}");
}

/// The child's role; without [`MARK_VAR`] (an ordinary run) it does nothing.
#[test]
fn child_queues_slow_work_then_exits() {
    let Some(mark) = std::env::var_os(MARK_VAR).map(PathBuf::from) else { return };
    let device = super::vulkan().expect("the parent found a device");
    let stream = device.new_stream().expect("a stream");
    stream
        .host_fn(move || {
            std::thread::sleep(Duration::from_millis(300));
            std::fs::write(&mark, "done").map_err(|e| e.to_string())
        })
        .expect("queued");
    // Dropping neither waits nor cancels; the test returns and the harness
    // exits the process while the worker sleeps.
    drop(stream);
    drop(device);
}
