//! A device name read against the registry: `KIND`, `KIND:N`, either with
//! `@R` for a device on MPI rank `R`.

use crate::LoadError;

use super::kind::Kind;

/// A device name, parsed: its kind, its index and its rank.
#[derive(Clone, Copy, Debug)]
pub struct DeviceName<'a> {
    /// The name without its rank (`cpu:1` of `cpu:1@2`), as the kind opens it.
    pub local: &'a str,
    /// Its kind.
    pub kind: &'static Kind,
    /// `N` of `KIND:N`; `None` for a bare `KIND`.
    pub index: Option<usize>,
    /// `R` of `@R`; `None` without a rank (rank 0 under `mpirun`).
    pub rank: Option<usize>,
}

impl<'a> DeviceName<'a> {
    /// Reads `name` (trimmed): its kind must be one of
    /// [`KINDS`](super::KINDS) (else [`LoadError::UnknownDevice`], which
    /// lists them), its index and rank numbers.
    pub fn parse(name: &'a str) -> Result<DeviceName<'a>, LoadError> {
        let name = name.trim();
        let bad = |why: String| LoadError::Open { names: name.to_string(), message: why };
        let (local, rank) = match name.rsplit_once('@') {
            None => (name, None),
            Some((local, rank)) => {
                let rank =
                    rank.parse::<usize>().map_err(|_| bad(format!("{rank:?} after `@` is not a rank number")))?;
                (local, Some(rank))
            }
        };
        let (prefix, index) = match local.split_once(':') {
            None => (local, None),
            Some((prefix, index)) => (prefix, Some(index)),
        };
        let kind = super::kinds::find(prefix).ok_or_else(|| LoadError::UnknownDevice(name.to_string()))?;
        let index = match index {
            None => None,
            Some(index) => Some(index.parse::<usize>().map_err(|_| {
                bad(format!("{index:?} after `{prefix}:` is not a device number (the names are {})", kind.forms()))
            })?),
        };
        Ok(DeviceName { local, kind, index, rank })
    }
}
