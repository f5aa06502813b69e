//! What the verbs share on the command line: the arguments, their choices,
//! the devices a `--devices` list names, and the model they load.

pub mod args;
pub mod choices;
pub mod device_table;
pub mod devices;
mod experts;
pub mod llama_flags;
pub mod load;
#[cfg(feature = "mpi")]
pub mod rank_model;
#[cfg(feature = "mpi")]
pub mod ranks;
pub mod spec;

/// Whether this process writes the command's outputs: always, but under
/// `mpirun` (feature `mpi`) only rank 0 does (every rank runs the same
/// command and has the same results).
pub fn writes_outputs() -> bool {
    #[cfg(feature = "mpi")]
    if ranks::launched_by_mpirun() {
        let rank = ["OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"].iter().find_map(|v| std::env::var(v).ok());
        return rank.is_none_or(|r| r.trim() == "0");
    }
    true
}

/// Parses `args` as the arguments `T` alone, for the tests of a verb's
/// arguments.
#[cfg(test)]
pub fn parse_alone<T: clap::Args>(args: &[&str]) -> Result<T, clap::Error> {
    let command = T::augment_args(clap::Command::new("baton"));
    let matches = command.try_get_matches_from(std::iter::once("baton").chain(args.iter().copied()))?;
    T::from_arg_matches(&matches)
}
