//! What can go wrong opening devices and loading a model.

/// Why devices could not be opened or a model not loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The device list names nothing.
    #[error("the device list is empty")]
    NoDevices,
    /// A name that is no device kind.
    #[error("unknown device {0:?}: the device kinds are {known} (see `baton devices`)", known = crate::registry::kinds::known_kinds())]
    UnknownDevice(String),
    /// A device of the list could not be opened.
    #[error("opening {names}: {message}")]
    Open {
        /// The names asked for.
        names: String,
        /// The backend's error.
        message: String,
    },
    /// An unknown split mode.
    #[error("unknown split mode {0:?}: the modes are `none`, `layer` and `tensor`")]
    UnknownSplit(String),
    /// Tensor-split shares that do not suit the devices.
    #[error("{0}")]
    TensorSplit(String),
    /// The composite device of a tensor split could not be built.
    #[error("building the composite device: {0}")]
    Composite(#[from] baton_composite::CompositeError),
    /// The model could not be loaded (a bad file, a device that failed).
    #[error("loading {path}: {source}")]
    Model {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: Box<baton_model::ModelError>,
    },
    /// The warm-up step after loading failed.
    #[error("the warm-up step after loading: {0}")]
    WarmUp(Box<baton_model::ModelError>),
}
