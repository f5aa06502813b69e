//! A multi-turn conversation with a model, reusing its KV cache across turns.

use baton_tokenizer::Tokenizer;

use crate::chat::{end_of_turn_tokens, ChatError, ChatTemplate, Message};
use baton_model::ModelError;
use baton_model::{Model, SavedPrefix};

/// What went wrong in a conversation.
#[derive(Debug, thiserror::Error)]
pub enum ConversationError {
    /// The template could not render the conversation.
    #[error(transparent)]
    Template(#[from] ChatError),
    /// The conversation no longer fits the model's context.
    #[error(
        "the context is full: the conversation needs {needed} positions, the context holds {context} \
         (start a new conversation, or load the model with a larger context, -c)"
    )]
    ContextFull {
        /// Positions the conversation needs.
        needed: usize,
        /// The context size.
        context: usize,
    },
    /// The rendered conversation could not be tokenized.
    #[error(transparent)]
    Tokenizer(#[from] baton_tokenizer::TokenizerError),
    /// The model failed to evaluate.
    #[error(transparent)]
    Model(ModelError),
}

impl From<ModelError> for ConversationError {
    fn from(e: ModelError) -> Self {
        match e {
            ModelError::ContextFull { needed, context } => ConversationError::ContextFull { needed, context },
            other => ConversationError::Model(other),
        }
    }
}

/// How one turn's prompt was evaluated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PromptStats {
    /// Tokens of the whole rendered conversation.
    pub tokens: usize,
    /// Of those, tokens whose keys and values were already in the cache.
    pub reused: usize,
    /// Tokens evaluated this turn (`tokens - reused`).
    pub evaluated: usize,
}

/// The messages of a conversation and the tokens its model's cache holds.
///
/// A multi-turn conversation with a model, reusing its KV cache across turns.
///
/// Each turn renders the whole conversation with the [`ChatTemplate`],
/// tokenizes it, keeps the longest prefix of tokens already in the cache
/// and evaluates only the rest. Dropping the cache's tail needs no work: the
/// next evaluation starts at the end of the kept prefix (its `past`), and
/// attention never reads the positions after it. Generated tokens go to the
/// cache as they are evaluated, so a reply costs nothing to re-read when the
/// next turn re-renders it (up to where its tokenization differs).
///
/// ```no_run
/// # use baton_model::{LoadOptions, Model};
/// use baton_gen::Message;
/// use baton_gen::Conversation;
///
/// # let device = baton_cpu::open(&["cpu"])?.remove(0);
/// let mut model = Model::load("model.gguf", device, &LoadOptions::default())?;
/// let mut chat = Conversation::for_model(&model)?;
/// chat.push(Message::user("What is the capital of France?"));
/// let (logits, _) = chat.prompt(&mut model)?;
/// let mut token = argmax(logits);
/// let mut answer = Vec::new();
/// while !chat.ends_turn(token) && chat.room(&model) > 0 {
///     answer.push(token);
///     token = argmax(chat.advance(&mut model, token)?);
/// }
/// chat.push(Message::assistant(model.tokenizer().decode(&answer)?));
/// # fn argmax(l: &[f32]) -> u32 { 0 }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Conversation {
    template: ChatTemplate,
    messages: Vec<Message>,
    /// The tokens whose keys and values are in the cache, at `0..len`.
    cached: Vec<u32>,
    stops: Vec<u32>,
    /// A hybrid model's recurrent state one token before the last
    /// prompt's end (its keys and values are in `cached`): a turn whose
    /// conversation shares that much but not all the cache holds (a
    /// template that rewrote the answer) resumes there, not at 0.
    checkpoint: Option<SavedPrefix>,
}

impl Conversation {
    /// A new conversation with `template`, for a model with `tokenizer`
    /// (which gives the end-of-turn tokens). The model's cache is taken as
    /// empty: a conversation owns the cache of the model it runs on.
    pub fn new(template: ChatTemplate, tokenizer: &Tokenizer) -> Conversation {
        let stops = end_of_turn_tokens(&template, tokenizer);
        Conversation { template, messages: Vec::new(), cached: Vec::new(), stops, checkpoint: None }
    }

    /// A new conversation with the model file's template (ChatML when it
    /// has none; see [`ChatTemplate::origin`]).
    pub fn for_model(model: &Model) -> Result<Conversation, ChatError> {
        let template = ChatTemplate::for_tokenizer(model.chat_template(), model.tokenizer())?;
        Ok(Conversation::new(template, model.tokenizer()))
    }

    /// The template.
    pub fn template(&self) -> &ChatTemplate {
        &self.template
    }

    /// The messages so far.
    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// Adds a message (a user turn before [`prompt`](Self::prompt), the
    /// assistant's answer after it).
    pub fn push(&mut self, message: Message) {
        self.messages.push(message);
    }

    /// Removes the last message (e.g. a user turn that did not fit).
    pub fn pop(&mut self) -> Option<Message> {
        self.messages.pop()
    }

    /// Positions of the cache in use: the next token goes there.
    pub fn past(&self) -> usize {
        self.cached.len()
    }

    /// The tokens in the cache, at positions `0..past()`.
    pub fn cached_tokens(&self) -> &[u32] {
        &self.cached
    }

    /// Positions left in the model's context.
    pub fn room(&self, model: &Model) -> usize {
        model.context().saturating_sub(self.cached.len())
    }

    /// The tokens that end the assistant's turn (EOS and the template's
    /// end-of-turn marker, e.g. `<|im_end|>`).
    pub fn stop_tokens(&self) -> &[u32] {
        &self.stops
    }

    /// Whether `token` ends the assistant's turn.
    pub fn ends_turn(&self, token: u32) -> bool {
        self.stops.contains(&token)
    }

    /// The tokens of the conversation rendered with the generation prompt
    /// ([`ChatTemplate::encode`]): special tokens written by the template
    /// are parsed, the messages' content is literal text; BOS is prepended
    /// when the vocabulary asks for it and the template did not write it.
    pub fn tokens(&self, tokenizer: &Tokenizer) -> Result<Vec<u32>, ConversationError> {
        Ok(self.template.encode(&self.messages, true, tokenizer)?)
    }

    /// Starts the assistant's turn: renders the conversation, keeps the
    /// longest prefix already in the cache, evaluates the rest, and returns
    /// the logits of the last token (the first answer token's distribution).
    pub fn prompt<'m>(&mut self, model: &'m mut Model) -> Result<(&'m [f32], PromptStats), ConversationError> {
        let tokens = self.tokens(model.tokenizer())?;
        if tokens.is_empty() {
            return Err(ChatError::Render {
                origin: self.template.origin(),
                detail: "the conversation renders to no tokens".into(),
            }
            .into());
        }
        let context = model.context();
        if tokens.len() > context {
            return Err(ConversationError::ContextFull { needed: tokens.len(), context });
        }
        let common = self.cached.iter().zip(&tokens).take_while(|(a, b)| a == b).count();
        // At least the last token is evaluated: its logits start the answer;
        // all of them where a sliding window's ring no longer holds what
        // resuming from the common prefix needs.
        let reused = common.min(tokens.len() - 1);
        let reused = match model.resumable(0, reused) {
            true => reused,
            false => self.resume_at_checkpoint(model, reused)?,
        };
        self.cached.truncate(reused);
        // A hybrid model's prompt stops one token short of its end for a
        // checkpoint there; the last token's logits start the answer.
        let hybrid = model.config().recurrent.is_some();
        if hybrid && tokens.len() - 1 > reused {
            model.eval_prompt(&tokens[reused..tokens.len() - 1], reused)?;
            self.checkpoint = model.save_checkpoint(0)?;
        }
        let from = if hybrid { reused.max(tokens.len() - 1) } else { reused };
        let logits = model.eval_prompt(&tokens[from..], from)?;
        let stats = PromptStats { tokens: tokens.len(), reused, evaluated: tokens.len() - reused };
        self.cached = tokens;
        Ok((logits, stats))
    }

    /// Where the cache resumes for `reused` shared tokens that the model's
    /// state does not hold: at the checkpoint, when it is not past them
    /// (its positions are still the cache's, and the new conversation shares
    /// them), written back; else at 0.
    fn resume_at_checkpoint(&mut self, model: &mut Model, reused: usize) -> Result<usize, ConversationError> {
        let Some(checkpoint) = self.checkpoint.as_ref().filter(|c| c.len() <= reused && !c.is_empty()) else {
            return Ok(0);
        };
        Ok(if model.restore_prefix(0, checkpoint)? { checkpoint.len() } else { 0 })
    }

    /// Evaluates a generated token at the end of the cache and returns the
    /// next token's logits. [`ConversationError::ContextFull`] when no
    /// position is left (check [`room`](Self::room) first to stop cleanly).
    pub fn advance<'m>(&mut self, model: &'m mut Model, token: u32) -> Result<&'m [f32], ConversationError> {
        let past = self.cached.len();
        let logits = model.eval(&[token], past, baton_model::Logits::Last)?;
        self.cached.push(token);
        Ok(logits)
    }
}
