//! `baton run --chat` (`-cnv`): a conversation with an instruct model
//! through its chat template, reusing the KV cache across turns.
//!
//! User turns come from stdin, one line each (a `> ` prompt on stderr when
//! stdin is a terminal); EOF or `/exit` ends. With `-p` the model answers
//! that one message and the command exits. stdout gets the answers only,
//! one per line; notes and statistics go to stderr. Ctrl-C stops the
//! current answer and the conversation goes on.

use std::io::{BufRead, IsTerminal, Write};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use baton_gen::Conversation;
use baton_gen::Sampler;
use baton_gen::{Message, TemplateOrigin};
use baton_model::Model;

use crate::cli::args::{ModelArgs, SamplingArgs};
use crate::util::tokens::{ends_generation, print_token};

/// Most tokens of an answer when `-n` is not given (a safety net against
/// answers that never end their turn; `-n` raises it).
const DEFAULT_ANSWER_TOKENS: usize = 512;

/// The command that ends an interactive conversation.
const EXIT_COMMAND: &str = "/exit";

/// Totals over the conversation, for the closing statistics line.
#[derive(Default)]
struct Totals {
    answers: usize,
    prompt_tokens: usize,
    reused_tokens: usize,
    prompt_time: Duration,
    generated: usize,
    generation_time: Duration,
}

/// What a conversation takes from `baton run`'s arguments.
pub struct ChatOptions<'a> {
    /// The model and its placement.
    pub model: &'a ModelArgs,
    /// How the answers' tokens are drawn.
    pub sampling: &'a SamplingArgs,
    /// A system message opening the conversation (`-sys`).
    pub system_prompt: Option<&'a str>,
    /// One user message to answer (`-p`) instead of turns from stdin.
    pub prompt: Option<&'a str>,
    /// Most tokens of an answer (`-n`; default [`DEFAULT_ANSWER_TOKENS`]).
    pub n_predict: Option<usize>,
    /// Also print special tokens.
    pub special: bool,
}

/// Runs `baton run --chat`.
pub fn run(args: &ChatOptions) -> Result<()> {
    let load_start = Instant::now();
    let mut model = args.model.load()?;
    let load_s = load_start.elapsed().as_secs_f64();
    let mut sampler = args.sampling.sampler(model.context())?;
    let mut chat = Conversation::for_model(&model)?;
    if chat.template().origin() == TemplateOrigin::ChatMlFallback {
        eprintln!("note: the model has no chat template (tokenizer.chat_template); using ChatML");
    }
    if let Some(system) = args.system_prompt {
        chat.push(Message::system(system));
    }
    let mut totals = Totals::default();
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    match args.prompt {
        Some(prompt) => {
            chat.push(Message::user(prompt));
            answer(&mut model, &mut chat, &mut sampler, args, &mut out, &mut totals)?;
        }
        None => {
            let stdin = std::io::stdin();
            let interactive = stdin.is_terminal();
            if interactive {
                eprintln!("chat: type a message and Enter; {EXIT_COMMAND} or Ctrl-D ends, Ctrl-C stops an answer");
            }
            let mut line = String::new();
            loop {
                if interactive {
                    eprint!("> ");
                    std::io::stderr().flush()?;
                }
                line.clear();
                if stdin.lock().read_line(&mut line).context("reading stdin")? == 0 {
                    break;
                }
                let text = line.trim_end_matches(['\n', '\r']);
                if text.trim() == EXIT_COMMAND {
                    break;
                }
                if text.trim().is_empty() {
                    continue;
                }
                chat.push(Message::user(text));
                answer(&mut model, &mut chat, &mut sampler, args, &mut out, &mut totals)?;
            }
        }
    }
    args.model.finish_trace(&model)?;
    let rate = |tokens: usize, time: Duration| tokens as f64 / time.as_secs_f64().max(1e-9);
    eprintln!(
        "\nload: {load_s:.2} s | prompt: {} tokens evaluated ({} reused from the cache), {:.1} t/s | \
         generation: {} tokens in {} answer{}, {:.1} t/s",
        totals.prompt_tokens,
        totals.reused_tokens,
        rate(totals.prompt_tokens, totals.prompt_time),
        totals.generated,
        totals.answers,
        if totals.answers == 1 { "" } else { "s" },
        rate(totals.generated, totals.generation_time)
    );
    Ok(())
}

/// Generates the assistant's answer to the conversation, streaming it to
/// `out`, and adds it to the conversation.
fn answer(
    model: &mut Model,
    chat: &mut Conversation,
    sampler: &mut Sampler,
    args: &ChatOptions,
    out: &mut impl Write,
    totals: &mut Totals,
) -> Result<()> {
    crate::util::interrupt::clear();
    let prompt_start = Instant::now();
    let (logits, stats) = chat.prompt(model)?;
    for &t in &chat.cached_tokens()[stats.reused..] {
        sampler.accept(t);
    }
    let mut token = sampler.sample(logits)?;
    totals.prompt_time += prompt_start.elapsed();
    totals.prompt_tokens += stats.evaluated;
    totals.reused_tokens += stats.reused;
    let tokenizer = model.shared_tokenizer();
    let mut decoder = tokenizer.stream_decoder(args.special);
    let mut text = String::new();
    let limit = args.n_predict.unwrap_or(DEFAULT_ANSWER_TOKENS);
    let mut generated = 0usize;
    let generation_start = Instant::now();
    loop {
        if chat.ends_turn(token) || ends_generation(&tokenizer, token, None) {
            break;
        }
        if crate::util::interrupt::requested() {
            eprintln!("\ninterrupted: the answer stopped after {generated} tokens");
            break;
        }
        sampler.accept(token);
        generated += 1;
        if let Some(piece) = print_token(&mut decoder, token, out)? {
            text.push_str(&piece);
        }
        if generated >= limit {
            break;
        }
        if chat.room(model) == 0 {
            eprintln!(
                "\ncontext full: the answer stops at {} positions (-c {}); the next turn will not fit",
                chat.past(),
                model.context()
            );
            break;
        }
        let logits = chat.advance(model, token)?;
        token = sampler.sample(logits)?;
    }
    if let Some(rest) = decoder.finish() {
        write!(out, "{rest}")?;
        text.push_str(&rest);
    }
    writeln!(out)?;
    out.flush()?;
    totals.generation_time += generation_start.elapsed();
    totals.generated += generated;
    totals.answers += 1;
    chat.push(Message::assistant(text));
    Ok(())
}
