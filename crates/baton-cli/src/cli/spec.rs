//! Speculative decoding's flags (`baton run`, `baton serve`, `baton
//! bench`), with llama.cpp's names where it has the concept.

use anyhow::{Context, Result};
use baton_gen::speculative::{
    ModelDrafter, MtpDrafter, NgramDrafter, SpecParams, SpecType, Speculation, StepCost, MAX_NGRAM,
};
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
    /// earlier in the prompt and output (no draft model), `mtp` with the
    /// model's own multi-token-prediction block (Qwen 3.5 files that hold
    /// one), and verifies the drafts in one step; the output is the same
    /// tokens as without.
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

/// One sequence's speculation (`baton run`, `baton bench spec`): a draft
/// model's (`drafter`, from [`DraftArgs::load`]), the head of the file at
/// `path` that `target` was loaded from (`--spec-type mtp`, refused on a
/// file without one), or n-grams; `None` without speculation.
pub fn speculation(
    params: SpecParams,
    drafter: Option<(ModelDrafter, SpecParams)>,
    (path, target): (&std::path::Path, &baton_model::Model),
) -> Result<Option<Speculation>> {
    match (drafter, params.kind) {
        (Some(_), SpecType::Mtp) => {
            anyhow::bail!("--model-draft and --spec-type mtp: one drafter at a time (the draft model or the head)")
        }
        (Some((drafter, params)), _) => Ok(Some(Speculation::with_model(params, drafter))),
        (None, SpecType::Mtp) if params.draft_max > 0 => {
            Ok(Some(Speculation::with_mtp(params, MtpDrafter::open(path, target)?)))
        }
        (None, _) => Ok(Speculation::new(params)),
    }
}

/// A draft model of the target's vocabulary (llama.cpp's `-md` and
/// `--device-draft`).
#[derive(Args, Clone, Debug)]
pub struct DraftArgs {
    /// A draft model of the same vocabulary (llama.cpp's `-md`): a smaller
    /// model's greedy tokens are the drafts, in place of n-grams; the
    /// output is the same tokens as without.
    #[arg(long = "model-draft", visible_alias = "md")]
    pub model_draft: Option<std::path::PathBuf>,
    /// The device of the draft model (llama.cpp's `--device-draft`).
    #[arg(long = "device-draft", default_value = "cpu", requires = "model_draft")]
    pub device_draft: String,
}

impl DraftArgs {
    /// The draft model for `target` (a slot for each of `slots` sequences
    /// drafting at once, `target`'s context), with `params` costing its
    /// drafts at its bytes read per token over the target's; `None`
    /// without `--model-draft`.
    pub fn load(
        &self,
        target: &baton_model::Model,
        threads: Option<usize>,
        slots: usize,
        params: SpecParams,
    ) -> Result<Option<(ModelDrafter, SpecParams)>> {
        let Some(path) = &self.model_draft else { return Ok(None) };
        let device = crate::cli::devices::open(&self.device_draft, threads)?;
        let device = device.into_iter().next().context("no draft device")?;
        let options = baton_model::LoadOptions { context: Some(target.context()), slots, ..Default::default() };
        let draft = baton_model::Model::load(path, device, &options)
            .with_context(|| format!("loading the draft model {}", path.display()))?;
        let drafter = ModelDrafter::new(draft, target)?;
        let cost = StepCost { per_draft: drafter.cost_against(target), ..params.cost };
        Ok(Some((drafter, SpecParams { cost, ..params })))
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
        assert!(error.to_string().contains("[possible values: none, ngram, mtp]"), "{error}");
        let bad = parse_alone::<SpecArgs>(&["--spec-ngram-min", "4"]).expect("parses");
        assert!(bad.params().is_err(), "min above max");
    }
}
