//! The composite device's tests, one test binary (`--test it`): the
//! conformance suite on composites, gates, heads split off group
//! boundaries, and windowed shares. The model-based test (`tests/model_based`) is a binary of
//! its own: it counts calls in process-wide statics.

mod conformance;
mod gates;
mod grouped_heads;
mod windows;
