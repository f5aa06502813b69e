//! The calls that move bytes (writes, reads, copies, computations), each
//! with the refusal the model expects and its model items.

use std::sync::Arc;

use baton_core::backend::Bindings;
use baton_core::graph::Graph;

use super::{call, floats, Lent, LentEntry, Run};
use crate::api;
use crate::model::{Effect, Item, Place, Target};
use crate::ops::{data, View, BUFFERS, BUFFER_BYTES, GUARD, STREAMS};

impl Run {
    pub(super) fn write(&mut self, stream: usize, dst: View, seed: u64, wrong_len: bool) {
        let (s, uid) = self.stream(stream);
        let (tensor, place, device) = self.tensor(&dst);
        let bytes = data(dst.bytes(), seed);
        let mut values = floats(&bytes);
        if wrong_len {
            values.push(1.0);
        }
        let refusal = if wrong_len {
            Some("SizeMismatch")
        } else if !self.accessible(self.streams[stream % STREAMS].device, device) {
            Some("InaccessibleBuffer")
        } else {
            None
        };
        let failed = self.failed_accesses();
        let result = call(s.write_async(&tensor, values.clone()));
        let result = self.handed_back("write_async", result, &values);
        if self.submitted("write_async", uid, &result, refusal, wrong_len) {
            self.inserted_waits(&s, uid, &failed);
            let pending = result.expect("queued");
            let point = pending.point().clone();
            let item = self.record(uid, Item::Mem { effect: Effect::Write { dst: place, bytes }, seq: 0 }, Some(point));
            self.wrote(place.buffer, uid, item);
            let target = Target::Stream { stream: uid, item };
            self.lent.push(LentEntry { target, lent: Some(Lent::WriteF32(pending, values)), returned: None });
        }
    }

    pub(super) fn write_range(
        &mut self,
        stream: usize,
        buffer: usize,
        offset: usize,
        len: usize,
        seed: u64,
        past_end: bool,
    ) {
        let (s, uid) = self.stream(stream);
        let slot = &self.buffers[buffer % BUFFERS];
        let (b, device, buffer_uid) = (slot.buffer.clone(), slot.device, slot.uid);
        if past_end {
            // A range is only made through the check (its fields are
            // private), so bytes past the end are never written.
            if let Ok(r) = call(api::range(&b, BUFFER_BYTES - 2, 8)) {
                self.problem(format!("Buffer::range accepted bytes past the end: {r:?}"));
            }
            return;
        }
        let range = call(api::range(&b, GUARD + offset, len)).expect("a range inside the buffer");
        let bytes = data(len, seed);
        let refusal = (!self.accessible(self.streams[stream % STREAMS].device, device)).then_some("InaccessibleBuffer");
        let failed = self.failed_accesses();
        let result = call(s.write_range_async(&range, bytes.clone()));
        let result = self.handed_back("write_range_async", result, &bytes);
        if self.submitted("write_range_async", uid, &result, refusal, false) {
            self.inserted_waits(&s, uid, &failed);
            let pending = result.expect("queued");
            let place = Place { buffer: buffer_uid, offset: GUARD + offset };
            let effect = Effect::Write { dst: place, bytes: bytes.clone() };
            let item = self.record(uid, Item::Mem { effect, seq: 0 }, Some(pending.point().clone()));
            self.wrote(buffer_uid, uid, item);
            let target = Target::Stream { stream: uid, item };
            self.lent.push(LentEntry { target, lent: Some(Lent::WriteBytes(pending, bytes)), returned: None });
        }
    }

    pub(super) fn wrote(&mut self, buffer_uid: usize, uid: usize, item: usize) {
        if let Some(Some(p)) = self.points[uid].get(item) {
            self.last_writer.insert(buffer_uid, (Target::Stream { stream: uid, item }, p.clone()));
        }
    }

    pub(super) fn read(&mut self, stream: usize, src: View, into: bool) {
        let (s, uid) = self.stream(stream);
        let (tensor, place, device) = self.tensor(&src);
        let refusal = (!self.accessible(self.streams[stream % STREAMS].device, device)).then_some("InaccessibleBuffer");
        let failed = self.failed_accesses();
        let read = self.model.reads;
        let effect = Effect::Read { src: place, len: src.bytes(), read };
        let lent = if into {
            let lent = vec![0f32; src.len];
            let result = call(s.read_into_async(&tensor, lent.clone()));
            let result = self.handed_back("read_into_async", result, &lent);
            if !self.submitted("read_into_async", uid, &result, refusal, false) {
                return;
            }
            result.map(|p| Lent::ReadF32(p, read)).expect("queued")
        } else {
            let result = call(s.read_async(&tensor));
            if !self.submitted("read_async", uid, &result, refusal, false) {
                return;
            }
            result.map(|p| Lent::ReadBytes(p, read)).expect("queued")
        };
        self.model.new_read();
        self.inserted_waits(&s, uid, &failed);
        let point = match &lent {
            Lent::ReadF32(p, _) => p.point().clone(),
            Lent::ReadBytes(p, _) => p.point().clone(),
            _ => unreachable!("a read lends a read buffer"),
        };
        let item = self.record(uid, Item::Mem { effect, seq: 0 }, Some(point));
        self.lent.push(LentEntry { target: Target::Stream { stream: uid, item }, lent: Some(lent), returned: None });
    }

    pub(super) fn copy(&mut self, stream: usize, src: View, dst: View, with_producer: bool) {
        let (s, uid) = self.stream(stream);
        let (from, src_place, src_device) = self.tensor(&src);
        let (to, dst_place, dst_device) = self.tensor(&dst);
        let device = self.streams[stream % STREAMS].device;
        let producer = if with_producer { self.last_writer.get(&src_place.buffer).cloned() } else { None };
        let producer = producer.filter(|(t, _)| !matches!(t, Target::Stream { stream, .. } if *stream == uid));
        if src.len != dst.len {
            let result = call(s.copy(&from, &to, producer.as_ref().map(|(_, p)| p)));
            self.submitted("copy", uid, &result, Some("SizeMismatch"), true);
            return;
        }
        if producer.is_some() && self.maybe_failed(uid).is_some() {
            self.skipped += 1; // which of the two calls is refused is a race
            return;
        }
        let refusal = (!self.accessible(device, src_device) || !self.accessible(device, dst_device))
            .then_some("InaccessibleBuffer");
        let failed = self.failed_accesses();
        let result = call(s.copy(&from, &to, producer.as_ref().map(|(_, p)| p)));
        if let Some((target, _)) = producer {
            let relayed = !self.native(device);
            self.record(uid, Item::Wait { target, bounded: false, expires: false, relayed, settles: false }, None);
        }
        if self.submitted("copy", uid, &result, refusal, false) {
            self.inserted_waits(&s, uid, &failed);
            let effect = Effect::Copy { src: src_place, dst: dst_place, len: src.bytes() };
            let item = self.record(uid, Item::Mem { effect, seq: 0 }, result.ok());
            self.wrote(dst_place.buffer, uid, item);
        }
    }

    pub(super) fn copy_staged(&mut self, stream: usize, src_stream: usize, src: View, dst: View) {
        let src_stream = if src_stream % STREAMS == stream % STREAMS { stream + 1 } else { src_stream };
        let (s, uid) = self.stream(stream);
        let (r, ruid) = self.stream(src_stream);
        let (from, src_place, src_device) = self.tensor(&src);
        let (to, dst_place, dst_device) = self.tensor(&dst);
        let (device, rdevice) = (self.streams[stream % STREAMS].device, self.streams[src_stream % STREAMS].device);
        if src.len != dst.len {
            let result = call(s.copy_staged(&r, &from, &to, None));
            self.submitted("copy_staged", uid, &result, Some("SizeMismatch"), true);
            return;
        }
        let usable = self.accessible(rdevice, src_device) && self.accessible(device, dst_device);
        if !usable || self.maybe_failed(uid).is_some() || self.maybe_failed(ruid).is_some() {
            self.skipped += 1; // which of its calls is refused would be a race
            return;
        }
        let failed = self.failed_accesses();
        let result = call(s.copy_staged(&r, &from, &to, None));
        if !self.submitted("copy_staged", uid, &result, None, false) {
            return;
        }
        self.inserted_waits(&r, ruid, &failed);
        let read = self.model.new_read();
        let effect = Effect::Read { src: src_place, len: src.bytes(), read };
        let read_item = self.record(ruid, Item::Mem { effect, seq: 0 }, Some(r.last_point()));
        let relayed = !self.native(device);
        let target = Target::Stream { stream: ruid, item: read_item };
        self.record(uid, Item::Wait { target, bounded: false, expires: false, relayed, settles: false }, None);
        self.inserted_waits(&s, uid, &failed);
        let effect = Effect::Copy { src: src_place, dst: dst_place, len: src.bytes() };
        let item = self.record(uid, Item::Mem { effect, seq: 0 }, result.ok());
        self.wrote(dst_place.buffer, uid, item);
    }

    pub(super) fn compute(
        &mut self,
        stream: usize,
        graph: &Arc<Graph>,
        views: &[(&str, View)],
        overlapping: bool,
        effect: &dyn Fn(&[Place]) -> Effect,
    ) {
        let (s, uid) = self.stream(stream);
        let device = self.streams[stream % STREAMS].device;
        let mut bindings = Bindings::new(graph);
        let mut places = Vec::new();
        let mut reachable = true;
        for (name, view) in views {
            let (t, place, d) = self.tensor(view);
            bindings.bind_name(name, t).expect("bind");
            places.push(place);
            reachable &= self.accessible(device, d);
        }
        let refusal = if overlapping {
            Some("Binding")
        } else if !reachable {
            Some("InaccessibleBuffer")
        } else {
            None
        };
        let failed = self.failed_accesses();
        let result = call(s.compute(bindings));
        if self.submitted("compute", uid, &result, refusal, overlapping) {
            self.inserted_waits(&s, uid, &failed);
            let out = *places.last().expect("an output");
            let item = self.record(uid, Item::Mem { effect: effect(&places), seq: 0 }, result.ok());
            self.wrote(out.buffer, uid, item);
        }
    }
}
