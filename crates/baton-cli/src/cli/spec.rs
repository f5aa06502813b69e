//! Speculative decoding's flags (`baton run`, `baton serve`, `baton
//! bench`), with llama.cpp's names where it has the concept.

use anyhow::Result;
use baton_gen::speculative::{NgramDrafter, SpecParams, SpecType, StepCost, MAX_NGRAM};
use clap::builder::TypedValueParser;
use clap::Args;

/// `--spec-type`'s parser: baton-gen's types (one list of them).
fn spec_type() -> impl TypedValueParser<Value = SpecType> {
    clap::builder::PossibleValuesParser::new(SpecType::ALL.map(SpecType::name))
        .map(|name| SpecType::from_name(&name).unwrap_or_default())
}

/// How tokens are drafted and verified; the tokens are the same with and
/// without (only the speed changes).
#[derive(Args, Clone, Debug)]
pub struct SpecArgs {
    /// Speculative decoding: `ngram` drafts by looking up the last tokens
    /// earlier in the prompt and output (no draft model) and verifies the
    /// drafts in one step; the output is the same tokens as without.
    #[arg(long = "spec-type", value_parser = spec_type(), default_value = "none")]
    pub spec_type: SpecType,
    /// The most drafted tokens one step verifies.
    #[arg(long = "draft-max", visible_alias = "draft", default_value_t = 8)]
    pub draft_max: usize,
    /// The fewest drafted tokens worth a verification step.
    #[arg(long = "draft-min", default_value_t = 1)]
    pub draft_min: usize,
    /// The longest n-gram looked up (tried first; then shorter ones).
    #[arg(long = "spec-ngram-max", default_value_t = 3)]
    pub ngram_max: usize,
    /// The shortest n-gram looked up.
    #[arg(long = "spec-ngram-min", default_value_t = 1)]
    pub ngram_min: usize,
}

impl SpecArgs {
    /// The parameters, checked.
    pub fn params(&self) -> Result<SpecParams> {
        if self.ngram_min == 0 || self.ngram_min > self.ngram_max || self.ngram_max > MAX_NGRAM {
            anyhow::bail!(
                "--spec-ngram-min {} and --spec-ngram-max {}: n-grams of 1 to {MAX_NGRAM} tokens, the least first",
                self.ngram_min,
                self.ngram_max
            );
        }
        Ok(SpecParams {
            kind: self.spec_type,
            draft_max: self.draft_max,
            draft_min: self.draft_min,
            drafter: NgramDrafter { max_n: self.ngram_max, min_n: self.ngram_min },
            cost: StepCost::MEASURED,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::parse_alone;

    #[test]
    fn spec_flags_parse_and_bad_ones_are_errors() {
        let args = parse_alone::<SpecArgs>(&["--spec-type", "ngram", "--draft-max", "4"]).expect("parses");
        let params = args.params().expect("valid");
        assert_eq!((params.kind, params.draft_max, params.draft_min), (SpecType::Ngram, 4, 1));
        let off = parse_alone::<SpecArgs>(&[]).expect("defaults");
        assert_eq!(off.spec_type, SpecType::None, "off by default");
        let error = parse_alone::<SpecArgs>(&["--spec-type", "eagle"]).expect_err("unknown type");
        assert!(error.to_string().contains("[possible values: none, ngram]"), "{error}");
        let bad = parse_alone::<SpecArgs>(&["--spec-ngram-min", "4"]).expect("parses");
        assert!(bad.params().is_err(), "min above max");
    }
}
