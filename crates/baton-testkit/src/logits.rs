//! Reading a model's logits the way greedy decoding does.

/// The token greedy decoding picks from `logits`: the index of the largest
/// value, the lowest index among equal ones; 0 when no value is above
/// `f32::MIN` (an empty slice, NaNs).
///
/// ```
/// assert_eq!(baton_testkit::argmax(&[0.5, 2.0, -1.0, 2.0]), 1);
/// assert_eq!(baton_testkit::argmax(&[]), 0);
/// ```
pub fn argmax(logits: &[f32]) -> u32 {
    let (index, _) = logits.iter().enumerate().fold((0, f32::MIN), |m, (i, &x)| if x > m.1 { (i, x) } else { m });
    index as u32
}
