//! The smallest sequences of the defects the model test found, one test
//! each, named by what must hold.
