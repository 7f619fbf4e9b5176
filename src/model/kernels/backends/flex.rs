//! [`KernelOps`] on burn-flex: every operation composed of primitives, the trait's defaults.

use crate::model::kernels::KernelOps;

#[cfg(feature = "flex")]
impl KernelOps for burn::backend::Flex {}
