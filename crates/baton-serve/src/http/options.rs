//! How the server behaves: body limits, timeouts, connections and what it
//! does when the engine fails.

use std::time::Duration;

use super::auth::ApiKeys;
use super::cors::CorsOrigins;

/// How the server behaves.
#[derive(Clone, Debug)]
pub struct ServerOptions {
    /// Largest request body in bytes; a larger one gets 413.
    pub body_limit: usize,
    /// After the shutdown signal, how long requests in flight may run on
    /// before they are cancelled.
    pub drain: Duration,
    /// How long a connection may take to send a request's head; hyper runs
    /// the same timer while a kept-alive connection waits for its next
    /// request, so it is the idle timeout too. Then the connection closes.
    pub header_timeout: Duration,
    /// How long a request's body may take to arrive once its head has;
    /// a slower one gets 408.
    pub body_timeout: Duration,
    /// Connections served at once; more wait in the kernel's backlog until
    /// one closes. Keep it below the process's file-descriptor limit.
    pub max_connections: usize,
    /// Stop serving (and return [`ServeError::EngineFailed`](super::ServeError::EngineFailed)) when the
    /// engine stops for good, rather than answer 503 to every request.
    pub stop_when_the_engine_fails: bool,
    /// How `/v1/embeddings` pools a text's hidden states (`--pooling`).
    pub pooling: baton_model::Pooling,
    /// The keys every route but `/health` needs (`--api-key`); none:
    /// every route is open. Each key has its own prefix cache.
    pub api_keys: ApiKeys,
    /// Refuse (404) a request whose `model` is not the served model's
    /// name (`--strict-model-name`); by default any name is served, as
    /// llama-server serves its one model.
    pub strict_model_name: bool,
    /// The model's other names (`--alias a,b,c`, as llama-server's): listed
    /// by `/v1/models` as its `aliases`, and answered to under
    /// `strict_model_name` beside its name.
    pub model_aliases: Vec<String>,
    /// Words `/v1/models` lists as the model's `tags` (`--tags`; only
    /// told, as llama-server's).
    pub model_tags: Vec<String>,
    /// Serve `GET /slots` (`--no-slots` turns it off: 501, as
    /// llama-server's `--no-slots`, for servers whose slots' state is
    /// nobody's business).
    pub slots_endpoint: bool,
    /// The origins whose web pages may call the server (`--cors-origins`;
    /// default: any, as llama-server).
    pub cors_origins: CorsOrigins,
    /// The model file, as `/props` tells it (`model_path`).
    pub model_path: String,
    /// Whether a chat answer's `<think>…</think>` is split out
    /// (`reasoning_content`, `thinking`, `reasoning`; `--reasoning-format`).
    pub reasoning_format: ReasoningFormat,
    /// A chat template (Jinja) in place of the model file's.
    pub chat_template: Option<String>,
    /// Variables every chat rendering is given (`--chat-template-kwargs`,
    /// e.g. `{"enable_thinking": false}`); a request's
    /// `chat_template_kwargs` go over them.
    pub chat_template_kwargs: serde_json::Map<String, serde_json::Value>,
    /// What a request that leaves out its temperature, seed or
    /// `max_tokens` takes (`--temp`, `--seed`, `-n`).
    pub defaults: super::defaults::RequestDefaults,
}

/// What becomes of a reasoning model's thinking (llama-server's
/// `--reasoning-format`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ReasoningFormat {
    /// Left in `content` as the model wrote it.
    None,
    /// In `message.reasoning_content` (`delta.reasoning_content`
    /// streamed), the rest in `content` (llama-server's default); a
    /// `thinking` block on Messages, a `reasoning` item on Responses.
    #[default]
    Deepseek,
}

impl std::str::FromStr for ReasoningFormat {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "none" => Ok(ReasoningFormat::None),
            "deepseek" => Ok(ReasoningFormat::Deepseek),
            other => Err(format!("{other:?}: none or deepseek")),
        }
    }
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            body_limit: 1 << 20,
            drain: Duration::from_secs(10),
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            max_connections: 512,
            stop_when_the_engine_fails: true,
            pooling: baton_model::Pooling::Mean,
            api_keys: ApiKeys::none(),
            strict_model_name: false,
            model_aliases: Vec::new(),
            model_tags: Vec::new(),
            slots_endpoint: true,
            cors_origins: CorsOrigins::Any,
            model_path: String::new(),
            reasoning_format: ReasoningFormat::Deepseek,
            chat_template: None,
            chat_template_kwargs: serde_json::Map::new(),
            defaults: super::defaults::RequestDefaults::default(),
        }
    }
}
