//! What the verbs share on the command line: the arguments, their choices,
//! the devices a `--devices` list names, and the model they load.

pub mod args;
pub mod choices;
pub mod devices;
pub mod load;
#[cfg(feature = "mpi")]
pub mod ranks;

/// Parses `args` as the arguments `T` alone, for the tests of a verb's
/// arguments.
#[cfg(test)]
pub fn parse_alone<T: clap::Args>(args: &[&str]) -> Result<T, clap::Error> {
    let command = T::augment_args(clap::Command::new("baton"));
    let matches = command.try_get_matches_from(std::iter::once("baton").chain(args.iter().copied()))?;
    T::from_arg_matches(&matches)
}
