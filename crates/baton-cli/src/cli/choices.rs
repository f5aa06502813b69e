//! The choices of the shared arguments, as clap `ValueEnum`s: clap checks
//! the spelling, and lists the choices in `--help` and in its error.

use std::fmt;

use baton_core::sync::WaitPolicy;
use baton_core::DType;
use baton_load::SplitMode;
use baton_model::KvPool;
use clap::builder::TypedValueParser;
use clap::ValueEnum;

/// `--split-mode`'s parser: baton-load's modes (one list of them), which
/// clap lists in `--help` and in its error.
pub fn split_mode() -> impl TypedValueParser<Value = SplitMode> {
    clap::builder::PossibleValuesParser::new(SplitMode::ALL.map(SplitMode::name)).try_map(|name| name.parse())
}

/// How the gates of `--split-mode tensor` wait (`--gate-policy`); the names
/// are `WaitPolicy`'s own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum GatePolicy {
    /// Sleep in the kernel until woken: a wake-up per gate, no CPU while waiting.
    Block,
    /// Poll for 50 µs, then block, so a long wait frees the core.
    Spin,
    /// Poll only (the fast fence; a wait ends in a timeout after 10 s).
    Poll,
}

/// How the all-reduces of `--split-mode tensor` over MPI ranks travel
/// (`--rank-collective`; all-gathers are MPI's under both).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum RankCollective {
    /// MPI's own non-blocking all-reduce (`MPI_Iallreduce`).
    #[default]
    Mpi,
    /// The butterfly over MPI point-to-point messages (the fallback).
    Butterfly,
}

/// The KV cache's element type (`--cache-type`, `-ctk`, `-ctv`; any letter
/// case). The block types need head sizes that are whole blocks (32).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum CacheType {
    /// Half precision (the default).
    F16,
    /// Single precision (the default of `baton perplexity`).
    F32,
    /// bfloat16.
    Bf16,
    /// 8-bit blocks of 32 with an f16 scale (8.5 bits per value).
    #[value(name = "q8_0")]
    Q8_0,
    /// 4-bit blocks of 32 with an f16 scale (4.5 bits per value).
    #[value(name = "q4_0")]
    Q4_0,
    /// 4-bit blocks of 32 with an f16 scale and minimum (5 bits per value).
    #[value(name = "q4_1")]
    Q4_1,
    /// 5-bit blocks of 32 with an f16 scale (5.5 bits per value).
    #[value(name = "q5_0")]
    Q5_0,
    /// 5-bit blocks of 32 with an f16 scale and minimum (6 bits per value).
    #[value(name = "q5_1")]
    Q5_1,
}

/// The name a choice is spelled with on the command line.
fn write_name(choice: &impl ValueEnum, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    match choice.to_possible_value() {
        Some(value) => f.write_str(value.get_name()),
        None => Ok(()),
    }
}

impl fmt::Display for RankCollective {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_name(self, f)
    }
}

impl fmt::Display for GatePolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_name(self, f)
    }
}

impl GatePolicy {
    /// The wait policy of this name, with the library's default times.
    pub fn wait_policy(self) -> WaitPolicy {
        match WaitPolicy::from_name(&self.to_string()) {
            Some(policy) => policy,
            None => unreachable!("gate policy {self} is not a WaitPolicy name (the names must match)"),
        }
    }
}

/// How the gates of a composite device (`--split-mode tensor`) wait:
/// `--gate-policy` where given, else `BATON_WAIT_POLICY` or
/// `BATON_FAST_SYNC` where set, else spin (poll for 50 µs, then block).
pub fn gate_policy(choice: Option<GatePolicy>) -> WaitPolicy {
    match choice {
        Some(choice) => choice.wait_policy(),
        None if std::env::var("BATON_FAST_SYNC").is_ok_and(|v| v == "1")
            || std::env::var("BATON_WAIT_POLICY").ok().and_then(|n| WaitPolicy::from_name(&n)).is_some() =>
        {
            WaitPolicy::process_default()
        }
        None => GatePolicy::Spin.wait_policy(),
    }
}

impl CacheType {
    /// The element type.
    pub fn dtype(self) -> DType {
        match self {
            CacheType::F16 => DType::F16,
            CacheType::F32 => DType::F32,
            CacheType::Bf16 => DType::BF16,
            CacheType::Q8_0 => DType::Q8_0,
            CacheType::Q4_0 => DType::Q4_0,
            CacheType::Q4_1 => DType::Q4_1,
            CacheType::Q5_0 => DType::Q5_0,
            CacheType::Q5_1 => DType::Q5_1,
        }
    }
}

/// `--kv-pool`'s parser: bytes with a unit (`512MiB`, `2GiB`, `1.5G`;
/// K, M, G and T count in 1,024s, as `--cache-ram`'s MiB do) or a bare
/// count of positions (`32768`).
pub fn kv_pool(text: &str) -> Result<KvPool, String> {
    let text = text.trim();
    let split = text.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let unit = unit.trim().to_ascii_lowercase();
    let scale: u64 = match unit.trim_end_matches("ib").trim_end_matches('b') {
        "" if unit.is_empty() => {
            let positions =
                number.parse().map_err(|_| format!("{text:?}: a count of positions or a size like 2GiB"))?;
            return match positions {
                0 => Err("a KV pool of no positions holds nothing".into()),
                p => Ok(KvPool::Positions(p)),
            };
        }
        "" => 1,
        "k" => 1 << 10,
        "m" => 1 << 20,
        "g" => 1 << 30,
        "t" => 1 << 40,
        _ => return Err(format!("{text:?}: the unit is one of B, KiB, MiB, GiB, TiB (or K, M, G, T)")),
    };
    let number: f64 = number.parse().map_err(|_| format!("{text:?}: a size like 512MiB or 2GiB"))?;
    match number * scale as f64 {
        bytes if bytes >= 1.0 && bytes.is_finite() => Ok(KvPool::Bytes(bytes as u64)),
        _ => Err(format!("{text:?}: a KV pool of no bytes holds nothing")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_gate_policy_is_the_wait_policy_of_its_name() {
        for policy in GatePolicy::value_variants() {
            let name = policy.to_string();
            assert_eq!(Some(policy.wait_policy()), WaitPolicy::from_name(&name), "--gate-policy {name}");
            assert_eq!(policy.wait_policy().name(), name);
        }
    }

    #[test]
    fn the_gate_policy_given_wins_over_the_environment() {
        assert_eq!(gate_policy(Some(GatePolicy::Block)), WaitPolicy::Block);
        assert_eq!(gate_policy(Some(GatePolicy::Poll)).name(), "poll");
    }

    #[test]
    fn split_modes_print_and_parse_as_spelled() {
        let names: Vec<String> = SplitMode::ALL.iter().map(SplitMode::to_string).collect();
        assert_eq!(names, ["none", "layer", "tensor", "expert"]);
        for mode in SplitMode::ALL {
            assert_eq!(mode.name().parse::<SplitMode>().ok(), Some(mode));
        }
    }

    #[test]
    fn kv_pool_reads_bytes_with_a_unit_and_positions_without() {
        assert_eq!(kv_pool("32768"), Ok(KvPool::Positions(32768)));
        assert_eq!(kv_pool("512MiB"), Ok(KvPool::Bytes(512 << 20)));
        assert_eq!(kv_pool("2G"), Ok(KvPool::Bytes(2 << 30)));
        assert_eq!(kv_pool("1.5gib"), Ok(KvPool::Bytes(3 << 29)));
        assert_eq!(kv_pool("4096 B"), Ok(KvPool::Bytes(4096)));
        for bad in ["", "0", "0MiB", "MiB", "1.2.3G", "12 parsecs", "-1"] {
            assert!(kv_pool(bad).is_err(), "{bad:?}");
        }
    }
}
