//! The value types a communicator carries, with their MPI datatypes.

use baton_core::backend::Element;
use mpi::ffi;

/// A plain value type MPI sends as one of its predefined datatypes.
///
/// # Safety
///
/// [`datatype`](Self::datatype) is the MPI datatype of exactly this type's
/// size and representation, so MPI reads and writes `n * size_of::<Self>()`
/// bytes for `n` values.
pub unsafe trait Wire: Element {
    /// Its name in operation descriptions (`f32`).
    const NAME: &'static str;
    /// Its MPI datatype.
    fn datatype() -> ffi::MPI_Datatype;
}

macro_rules! wire {
    ($($t:ty => $name:literal, $datatype:ident;)*) => {$(
        // SAFETY: the MPI predefined datatype named here is this type's
        // C equivalent (same size, same representation).
        unsafe impl Wire for $t {
            const NAME: &'static str = $name;
            fn datatype() -> ffi::MPI_Datatype {
                // SAFETY: reading a predefined MPI handle, set before any
                // call of ours (MPI is initialised by `World`).
                unsafe { ffi::$datatype }
            }
        }
    )*};
}

wire! {
    f32 => "f32", RSMPI_FLOAT;
    u8 => "u8", RSMPI_UINT8_T;
    u32 => "u32", RSMPI_UINT32_T;
    i32 => "i32", RSMPI_INT32_T;
}
