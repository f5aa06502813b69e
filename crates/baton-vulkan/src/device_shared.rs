//! What a device's streams share: its context, its info, its pipelines and
//! the registry of its streams' timelines (so a stream can find the
//! semaphore behind a point of the same device and wait on it natively).

use baton_core::loom::Mutex;
use std::collections::HashMap;
use std::sync::Arc;

use baton_core::backend::DeviceInfo;
use baton_core::sync::TimelineId;

use crate::context::Context;
use crate::pipelines::Pipelines;
use crate::timeline::StreamTimeline;

/// What a device's streams share.
pub(crate) struct DeviceShared {
    pub(crate) ctx: Arc<Context>,
    pub(crate) info: DeviceInfo,
    pub(crate) pipelines: Pipelines,
    /// Every stream timeline of this device, for native waits. Timelines
    /// live as long as the device (a point may outlive its stream).
    timelines: Mutex<HashMap<TimelineId, Arc<StreamTimeline>>>,
}

impl DeviceShared {
    /// The shared part of a device over `ctx`, with no stream timeline yet.
    pub(crate) fn new(ctx: Arc<Context>, info: DeviceInfo, pipelines: Pipelines) -> DeviceShared {
        DeviceShared { ctx, info, pipelines, timelines: Mutex::new(HashMap::new()) }
    }

    /// The timeline behind a point's timeline id, if it is this device's.
    pub(crate) fn timeline(&self, id: TimelineId) -> Option<Arc<StreamTimeline>> {
        self.timelines.lock().get(&id).cloned()
    }

    /// Records a stream timeline of this device, for native waits on its
    /// points.
    pub(crate) fn register(&self, timeline: &Arc<StreamTimeline>) {
        let mut all = self.timelines.lock();
        all.insert(timeline.mirror.id(), timeline.clone());
    }
}
