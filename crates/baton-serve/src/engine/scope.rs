//! Who may reuse a prompt's cached keys and values: the prefix cache
//! (free slots, running sequences, host memory) gives a request only the
//! positions that a request of the same [`CacheScope`] evaluated. The
//! server derives the scope from the client's API key and `cache_salt`
//! (`http/auth.rs`), so one client cannot learn from `cached_tokens` or
//! from its time to first token whether another sent a prompt.

/// An opaque tag of who filled a cache entry; entries are reused only by
/// requests with the same tag. [`CacheScope::SHARED`] (the default) is what
/// every request gets that asks for no other.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CacheScope(pub u64);

impl CacheScope {
    /// The scope of requests that name none: they all share their prefixes.
    pub const SHARED: CacheScope = CacheScope(0);
}
