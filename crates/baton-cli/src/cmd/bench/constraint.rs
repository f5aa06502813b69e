//! `baton bench constraint`: what holding a text to a format costs per
//! generated token, the grammar engine (llguidance) holding a JSON Schema,
//! a tool call whose arguments are that schema, and GBNF, with a model's
//! vocabulary and no model: the sampling step is replayed as the server
//! runs it. Each case's ratio is against the JSON Schema's, round by round.
//!
//! Each sequence writes a fixed text the format accepts, token by token.
//! At each step a token is "drawn": the text's next token with
//! probability `--fit` (a model that already writes the format), another
//! token of the vocabulary otherwise. The drawn token is checked
//! (`allows`); a refused one makes the constraint mask the whole row of
//! logits, as the server's sampler then draws again; then the text's token
//! is taken (`accept`). Sequences step in turn, as the engine's worker
//! samples them. Cases alternate within each round, so each round gives a
//! paired ratio on a busy machine.

use std::sync::Arc;
use std::time::Instant;

use anyhow::{ensure, Context, Result};
use baton_gen::constraint::{tool_call_grammar, CallShape, Constraint, Grammar, GrammarSource, GrammarVocabulary};
use baton_model::baton_tokenizer::{EncodeOptions, Tokenizer};
use clap::Args;
use serde_json::{json, Value};

/// Arguments of `baton bench constraint`.
#[derive(Args)]
pub struct ConstraintBenchArgs {
    /// The GGUF file whose vocabulary the constraints read.
    #[arg(short = 'm', long)]
    model: std::path::PathBuf,
    /// Sequences stepped together, per run.
    #[arg(long, value_delimiter = ',', default_value = "1,8")]
    sequences: Vec<usize>,
    /// Tokens each sequence writes.
    #[arg(long, default_value_t = 1500)]
    tokens: usize,
    /// Share of draws that already fit the format (the rest are masked).
    #[arg(long, default_value_t = 0.9)]
    fit: f64,
    /// Rounds; each runs every case once, in turn.
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

/// An order of many lines: the schema, and a text it accepts.
fn order_schema() -> Value {
    json!({
        "type": "object",
        "properties": {"lines": {"type": "array", "items": {
            "type": "object",
            "properties": {
                "item": {"type": "string", "maxLength": 24},
                "count": {"type": "integer"},
                "urgent": {"type": "boolean"},
                "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            },
            "required": ["item", "count", "urgent", "note"],
        }}},
        "required": ["lines"],
    })
}

const WORDS: [&str; 8] = ["tea", "coffee", "cake", "bread", "milk", "apples", "rice", "soup"];

fn order_text(lines: usize) -> String {
    let line = |i: usize| {
        let note = if i.is_multiple_of(3) { json!(format!("by {} pm", i % 12)) } else { Value::Null };
        json!({"item": format!("{} {}", WORDS[i % 8], WORDS[(i / 8) % 8]), "count": i * 7 % 100,
               "urgent": i.is_multiple_of(2), "note": note})
    };
    let lines: Vec<String> = (0..lines).map(|i| line(i).to_string()).collect();
    format!("{{\"lines\": [{}]}}", lines.join(", "))
}

const GBNF: &str = "root ::= line+\nline ::= name \": \" count \" \" unit \"\\n\"\n\
    name ::= [a-z]+ (\" \" [a-z]+)?\ncount ::= [1-9] [0-9]{0,3}\nunit ::= \"kg\" | \"g\" | \"items\"\n";

fn gbnf_text(lines: usize) -> String {
    let units = ["kg", "g", "items"];
    (0..lines)
        .map(|i| format!("{} {}: {} {}\n", WORDS[i % 8], WORDS[(i / 8) % 8], 1 + i * 7 % 900, units[i % 3]))
        .collect()
}

/// One way of holding a text: a name, a new constraint, and its text.
struct Case {
    name: &'static str,
    start: Box<dyn Fn() -> Constraint>,
    tokens: Vec<u32>,
}

/// A small deterministic generator (splitmix64).
struct Draws(u64);

impl Draws {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Seconds to step `sequences` constraints of `case` through its text,
/// and the masks computed.
fn run_case(case: &Case, tokenizer: &Tokenizer, sequences: usize, fit: f64, seed: u64) -> Result<(f64, usize)> {
    let vocab = tokenizer.vocab_size();
    let mut draws = Draws(seed);
    let logits: Vec<f32> = (0..vocab).map(|_| (draws.next() % 10_000) as f32 / 1000.0).collect();
    let mut constraints: Vec<Constraint> = (0..sequences).map(|_| (case.start)()).collect();
    let mut row = logits.clone();
    let mut masks = 0;
    let started = Instant::now();
    for &token in &case.tokens {
        for constraint in &mut constraints {
            let drawn = if draws.unit() < fit { token } else { (draws.next() % vocab as u64) as u32 };
            if !constraint.allows(drawn, tokenizer) {
                row.copy_from_slice(&logits);
                let allowed = constraint.mask(&mut row, tokenizer);
                ensure!(allowed > 0, "{}: no token fits", case.name);
                masks += 1;
            }
            ensure!(constraint.accept(token, tokenizer), "{}: the text's token {token} was refused", case.name);
        }
    }
    Ok((started.elapsed().as_secs_f64(), masks))
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// Runs `baton bench constraint`.
pub fn run(args: ConstraintBenchArgs) -> Result<()> {
    ensure!(args.rounds >= 1 && args.tokens >= 1, "--rounds and --tokens must be at least 1");
    ensure!(!args.sequences.is_empty() && !args.sequences.contains(&0), "--sequences must list counts of at least 1");
    let file = baton_model::baton_gguf::GgufFile::open(&args.model)
        .with_context(|| format!("opening {}", args.model.display()))?;
    let tokenizer = baton_model::tokenizer_from_gguf(&file)?;
    let started = Instant::now();
    let vocabulary = Arc::new(GrammarVocabulary::new(&tokenizer)?);
    let trie_ms = started.elapsed().as_secs_f64() * 1e3;
    let encode = |text: &str| -> Result<Vec<u32>> {
        let mut tokens = tokenizer.encode(text, EncodeOptions { add_special: false, parse_special: false })?;
        ensure!(tokens.len() >= args.tokens, "the text has {} tokens, fewer than --tokens", tokens.len());
        tokens.truncate(args.tokens);
        Ok(tokens)
    };
    let lines = args.tokens / 8 + 1;
    let compile = |source: GrammarSource| -> Result<(Arc<Grammar>, f64)> {
        let started = Instant::now();
        let grammar = Arc::new(vocabulary.compile(&source)?);
        Ok((grammar, started.elapsed().as_secs_f64() * 1e3))
    };
    let (schema_grammar, schema_ms) = compile(GrammarSource::JsonSchema(order_schema()))?;
    let (gbnf_grammar, gbnf_ms) = compile(GrammarSource::Gbnf(GBNF.into()))?;
    let order = order_schema();
    let call = tool_call_grammar([("order", &order)], CallShape { parallel: false, opens: false });
    let (call_grammar, call_ms) = compile(call)?;
    let cases = [
        Case {
            name: "json_schema",
            start: Box::new(move || Constraint::grammar(&schema_grammar)),
            tokens: encode(&order_text(lines))?,
        },
        Case {
            name: "tool call (the schema as arguments)",
            start: Box::new(move || Constraint::grammar(&call_grammar)),
            tokens: encode(&format!("{{\"name\": \"order\", \"arguments\": {}}}", order_text(lines)))?,
        },
        Case {
            name: "GBNF",
            start: Box::new(move || Constraint::grammar(&gbnf_grammar)),
            tokens: encode(&gbnf_text(lines))?,
        },
    ];
    let mut report = Vec::new();
    for &sequences in &args.sequences {
        // Per case: µs per token of each round.
        let mut per_token: Vec<Vec<f64>> = vec![Vec::new(); cases.len()];
        let mut masks = vec![0; cases.len()];
        for round in 0..args.rounds {
            for (i, case) in cases.iter().enumerate() {
                let (seconds, masked) = run_case(case, &tokenizer, sequences, args.fit, round as u64)?;
                per_token[i].push(seconds * 1e6 / (sequences * case.tokens.len()) as f64);
                masks[i] = masked;
            }
        }
        for (i, case) in cases.iter().enumerate() {
            let ratios: Vec<f64> = (0..args.rounds).map(|r| per_token[i][r] / per_token[0][r]).collect();
            report.push(json!({
                "case": case.name, "sequences": sequences, "tokens_per_sequence": case.tokens.len(),
                "us_per_token": median(per_token[i].clone()), "masks": masks[i],
                "over_json_schema": median(ratios),
            }));
        }
    }
    let setup = json!({"vocabulary": tokenizer.vocab_size(), "trie_ms": trie_ms, "compile_schema_ms": schema_ms,
                       "compile_gbnf_ms": gbnf_ms, "compile_tool_call_ms": call_ms, "fit": args.fit, "rounds": args.rounds});
    if args.json {
        println!("{}", json!({"setup": setup, "cases": report}));
        return Ok(());
    }
    println!("vocabulary {} tokens: trie {trie_ms:.1} ms; compile: schema {schema_ms:.2} ms, tool call {call_ms:.2} ms, GBNF {gbnf_ms:.2} ms; fit {}; median of {} rounds",
        tokenizer.vocab_size(), args.fit, args.rounds);
    println!("| case | sequences | tokens each | masks | µs per token | over json_schema |");
    println!("|---|---|---|---|---|---|");
    for row in &report {
        println!(
            "| {} | {} | {} | {} | {:.2} | {:.2} |",
            row["case"].as_str().unwrap_or(""),
            row["sequences"],
            row["tokens_per_sequence"],
            row["masks"],
            row["us_per_token"].as_f64().unwrap_or(f64::NAN),
            row["over_json_schema"].as_f64().unwrap_or(f64::NAN)
        );
    }
    Ok(())
}
