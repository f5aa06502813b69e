//! The paths a stream takes across streams and devices: how it orders its
//! work after another stream's point, and how it copies memory it may not
//! address. [`Stream::wait_path`](crate::backend::Stream::wait_path) and
//! [`Stream::copy_path`](crate::backend::Stream::copy_path) decide them, for
//! the work they queue and for plans that describe it (`baton plan`).

use std::fmt;

/// How a stream orders its later work after a point (rule W-FOREIGN).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WaitPath {
    /// The point is of the stream's own timeline: stream order alone.
    StreamOrder,
    /// The stream queues a native wait: its backend waits on the point's
    /// timeline itself (`RawStream::can_wait_on`).
    Native,
    /// The stream cannot wait natively on the point's timeline: the relay
    /// (`Stream::wait_or_relay`) queues a host function, in the stream's
    /// order, in which a host thread waits for the point.
    Relay,
}

impl fmt::Display for WaitPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            WaitPath::StreamOrder => "stream order",
            WaitPath::Native => "native wait",
            WaitPath::Relay => "relay wait",
        })
    }
}

/// How a stream copies from a range of memory (rule C-CROSS).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CopyPath {
    /// The stream addresses the source (`RawStream::can_access`): one copy
    /// on the stream (`Stream::copy`).
    Direct,
    /// It cannot: the source's own stream reads it into host memory and
    /// this stream writes it (`Stream::copy_staged`).
    HostStaged,
}

impl fmt::Display for CopyPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CopyPath::Direct => "direct copy",
            CopyPath::HostStaged => "host-staged copy",
        })
    }
}
