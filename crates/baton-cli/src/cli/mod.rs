//! What the verbs share on the command line: the arguments, their choices,
//! the devices a `--devices` list names, and the model they load.

pub mod args;
pub mod choices;
pub mod devices;
pub mod load;
