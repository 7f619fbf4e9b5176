//! What depth mixing costs at scale, from formulas alone (docs/cost.md): per-token memory
//! I/O of each residual scheme (the report's Table 1), pipeline-parallel communication with
//! and without cross-stage caching (its Eqs. 7-8, checked against a step-by-step count), and
//! the prefill memory of the block cache. Plain numbers in, plain numbers out: this floor
//! knows nothing of the model, so `model`, `analysis` and `cli` can all use it.

pub mod io;
pub mod pipeline;
pub mod prefill;

/// Bytes per element of a storage type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dtype {
    F32,
    Bf16,
    Fp8,
}

impl Dtype {
    pub fn bytes(self) -> f64 {
        match self {
            Self::F32 => 4.0,
            Self::Bf16 => 2.0,
            Self::Fp8 => 1.0,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::F32 => "f32",
            Self::Bf16 => "bf16",
            Self::Fp8 => "fp8",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "f32" | "fp32" | "float32" => Some(Self::F32),
            "bf16" | "bfloat16" => Some(Self::Bf16),
            "fp8" | "f8" => Some(Self::Fp8),
            _ => None,
        }
    }
}
