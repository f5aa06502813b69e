//! The slots' states published for `GET /slots` ([`SlotView`]).

use super::super::slot_view::SlotView;
use super::Worker;

impl Worker {
    /// Publishes what each slot holds now.
    pub(super) fn publish_slots(&self) {
        let mut views: Vec<SlotView> = (0..self.options.parallel)
            .map(|id| SlotView { id, n_tokens: self.prefix.tokens(id).len(), ..SlotView::default() })
            .collect();
        for seq in &self.running {
            if let Some(view) = views.get_mut(seq.slot) {
                *view = SlotView {
                    id: seq.slot,
                    is_processing: true,
                    n_tokens: seq.past,
                    n_prompt_tokens: seq.prompt.len(),
                    n_decoded: seq.generated,
                    n_remain: seq.max_tokens.saturating_sub(seq.generated),
                };
            }
        }
        let busy = self.embeds.iter().map(|e| e.slot).chain(self.scores.iter().map(|s| s.slot));
        for slot in busy {
            if let Some(view) = views.get_mut(slot) {
                view.is_processing = true;
            }
        }
        *self.shared.slots.lock() = views;
    }
}
