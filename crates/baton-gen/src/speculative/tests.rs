//! `verify` and `Speculation` on rows whose drawn token is known: which
//! rows are drawn from, what is accepted, what the counts say.

use super::*;

/// Rows of width 1 whose value is the token a draw gives.
fn rows(tokens: &[u32]) -> Vec<Vec<f32>> {
    tokens.iter().map(|&t| vec![t as f32]).collect()
}

fn walk(given: &[u32], drafts: &[u32], end_at: Option<u32>) -> (Verified, Vec<u32>) {
    let rows = rows(given);
    let mut drawn = Vec::new();
    let verified = verify::<()>(rows.iter().map(Vec::as_slice), drafts, |row| {
        let token = row[0] as u32;
        drawn.push(token);
        Ok(if Some(token) == end_at { Drawn::End } else { Drawn::Token(token) })
    })
    .expect("no error");
    (verified, drawn)
}

#[test]
fn accepts_drafts_while_the_drawn_token_matches() {
    // Every draft matches: the last row gives the next token.
    assert_eq!(walk(&[5, 6, 7], &[5, 6], None), (Verified { accepted: 2, next: Some(7) }, vec![5, 6, 7]));
    // The second draft is rejected: its row's token is next, no row after
    // it is drawn from.
    assert_eq!(walk(&[5, 9, 7], &[5, 6], None), (Verified { accepted: 1, next: Some(9) }, vec![5, 9]));
    // No draft: one row.
    assert_eq!(walk(&[4], &[], None), (Verified { accepted: 0, next: Some(4) }, vec![4]));
}

#[test]
fn an_end_stops_the_walk_at_its_row() {
    // The end comes on an accepted draft's row: nothing after it is drawn.
    assert_eq!(walk(&[5, 2, 7], &[5, 2], Some(2)), (Verified { accepted: 1, next: None }, vec![5, 2]));
}

#[test]
fn errors_of_the_draw_pass_through() {
    let rows = rows(&[1, 2]);
    let result = verify(rows.iter().map(Vec::as_slice), &[1], |_| Err::<Drawn, _>("bad row"));
    assert_eq!(result, Err("bad row"));
}

#[test]
fn speculation_counts_what_it_verified() {
    let params = SpecParams { kind: SpecType::Ngram, cost: StepCost::FREE, ..SpecParams::default() };
    let mut spec = Speculation::new(params).expect("ngram");
    let times = StepTimes::new(spec.params().cost);
    let history = [1, 2, 3, 4, 1, 2, 3];
    assert_eq!(spec.draft(&history, 8, (1, &times)).expect("n-grams"), &[4, 1, 2, 3]);
    spec.settle(2, Some(9));
    assert_eq!(spec.stats(), SpecStats { drafted: 4, accepted: 2, steps: 1 });
    assert_eq!(spec.stats().acceptance(), 0.5);
    // Room bounds the draft.
    assert_eq!(spec.draft(&history, 1, (1, &times)).expect("n-grams"), &[4]);
    spec.settle(1, Some(1));
    assert_eq!(spec.stats(), SpecStats { drafted: 5, accepted: 3, steps: 2 });
    // None for no speculation.
    assert!(Speculation::new(SpecParams::default()).is_none());
    assert!(Speculation::new(SpecParams { draft_max: 0, ..params }).is_none());
    assert_eq!(SpecType::from_name("ngram"), Some(SpecType::Ngram));
    assert_eq!(SpecType::from_name("eagle"), None);
}
