//! Operations that burn's tensor API composes out of many small kernels, given a kernel (or
//! a backward pass) of their own through burn's backend extensions: causal attention,
//! RMSNorm, rotary position embedding, SwiGLU's gating, mHC's Sinkhorn-Knopp, the
//! multi-stream residual's read and update, one AttnRes mixing step, the stack of sources
//! that the mixing steps read, a sublayer's products with its weights, and one AdamW step of
//! a parameter. Each stays because it measured 3% or more faster somewhere than its
//! composed form (docs/performance.md).
//!
//! [`KernelOps`] (`ops.rs`) names each operation. Its default is the operation composed of
//! primitive tensor operations (`composed`), which flex, CUDA and bf16 run. libtorch on the
//! CPU in f32 overrides it with libtorch's fused kernels and ours (`backends/tch.rs`; the
//! row kernels `rows`, `mix_rows` and `sinkhorn` run in the CPU's widest vectors,
//! `cpu.rs`); on CUDA and bf16 the mixing step takes a few libtorch operations (`mix_tch`).
//! The autodiff wrapper (`backends/autodiff.rs`) gives each a hand-written backward instead
//! of differentiating the composition op by op. `tests/kernels.rs` holds each to the
//! composed form, in value and in every input's gradient.

pub mod adamw;
mod at_push;
pub mod attention;
mod backends;
mod composed;
mod cpu;
pub mod linear;
pub mod mix;
#[cfg(feature = "tch")]
mod mix_rows;
#[cfg(feature = "tch")]
mod mix_tch;
pub mod norm;
#[cfg(feature = "tch")]
mod omp;
mod ops;
pub mod rotary;
#[cfg(feature = "tch")]
mod rows;
pub mod sinkhorn;
pub mod stack;
mod stack_grad;
mod step_record;
pub mod streams;
pub mod swiglu;
#[cfg(feature = "tch")]
mod tch_memory;
#[cfg(feature = "tch")]
mod vml;
#[cfg(feature = "tch")]
pub use vml::warm_up_vml;

pub use ops::KernelOps;
