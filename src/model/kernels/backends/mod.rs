//! [`KernelOps`] for each backend: libtorch's kernels and ours on tch, the composed
//! primitives on flex, and the autodiff wrappers with their hand-written backward passes,
//! a file each.

mod autodiff;
#[cfg(feature = "flex")]
mod flex;
#[cfg(feature = "tch")]
mod tch;
