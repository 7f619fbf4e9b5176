//! The one place that names concrete burn backends: `tch` (libtorch, CPU or CUDA) and
//! `flex` (pure Rust CPU). Everything else takes a [`Device`].

use burn::tensor::{Device, FloatDType};
use serde::{Deserialize, Serialize};
use thiserror::Error;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// libtorch through burn-tch: the fast one; CUDA where there is a GPU.
    Tch,
    /// burn-flex: pure Rust, needs no set-up.
    Flex,
}

/// The float type a run trains in (`train.precision`): weights, activations, gradients and
/// Adam's moments alike. The loss is always reduced in f32.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    #[default]
    F32,
    /// bfloat16 weights and all (no f32 master copy): half the memory, and on GPUs the
    /// bf16 tensor-core rate; tch only.
    Bf16,
}

impl Precision {
    pub fn is_f32(&self) -> bool {
        *self == Self::F32
    }

    /// The storage type it is, as the cost formulas count it.
    pub fn storage(self) -> crate::cost::Dtype {
        match self {
            Self::F32 => crate::cost::Dtype::F32,
            Self::Bf16 => crate::cost::Dtype::Bf16,
        }
    }

    pub fn name(self) -> &'static str {
        self.storage().name()
    }

    /// Bytes per element.
    pub fn bytes(self) -> f64 {
        self.storage().bytes()
    }

    fn dtype(self) -> FloatDType {
        match self {
            Self::F32 => FloatDType::F32,
            Self::Bf16 => FloatDType::BF16,
        }
    }
}

#[derive(Debug, Error)]
pub enum BackendError {
    #[error(
        "this attnres binary was built without the `tch` feature; run `make build` (which \
         sets up libtorch and enables it) or pass `--backend flex`"
    )]
    TchMissing,
    #[error("this attnres binary was built without the `flex` feature; pass `--backend tch`")]
    FlexMissing,
    #[error("unknown device `{0}`: use `cpu`, `cuda` or `cuda:N`")]
    BadDevice(String),
    #[error("device `{0}` needs the tch backend; pass `--backend tch`")]
    CudaNeedsTch(String),
    #[error(
        "device `cuda:{index}` is not available: libtorch sees {count} CUDA device(s){hint}; \
         train on `--device cpu`, or see docs/gpu.md"
    )]
    NoCuda {
        index: usize,
        count: usize,
        hint: &'static str,
    },
    #[error(
        "precision {wanted} on {device}: this process already made {has} tensors there, and a \
         device holds one precision per process; train the {wanted} runs in a process of \
         their own"
    )]
    MixedPrecision {
        device: String,
        wanted: &'static str,
        has: String,
    },
    #[error("the {backend} backend cannot train in {wanted} ({reason}); pass `--backend tch`")]
    UnsupportedPrecision {
        backend: &'static str,
        wanted: &'static str,
        reason: String,
    },
}

/// Makes `device` (and its autodiff twin) create float tensors in `precision`. burn keeps
/// one default per device per process, fixed by the first tensor made there: an f32 run
/// leaves the default alone (so f32 training is what it always was), and a process that has
/// trained in one precision refuses the other.
pub fn set_precision(
    kind: BackendKind,
    device: &Device,
    precision: Precision,
) -> Result<(), BackendError> {
    for mut d in [device.clone(), device.clone().autodiff()] {
        if d.settings().float_dtype == precision.dtype() {
            continue;
        }
        d.configure(precision.dtype()).map_err(|e| match e {
            burn::tensor::DeviceError::AlreadyInitialized { device } => {
                BackendError::MixedPrecision {
                    device,
                    wanted: precision.name(),
                    has: format!("{:?}", d.settings().float_dtype).to_lowercase(),
                }
            }
            other => BackendError::UnsupportedPrecision {
                backend: kind.name(),
                wanted: precision.name(),
                reason: other.to_string(),
            },
        })?;
    }
    Ok(())
}

impl BackendKind {
    /// tch when it is compiled in, flex otherwise.
    pub fn preferred() -> Self {
        if cfg!(feature = "tch") {
            Self::Tch
        } else {
            Self::Flex
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Tch => "tch",
            Self::Flex => "flex",
        }
    }

    /// The backends this binary holds.
    pub fn compiled() -> Vec<Self> {
        let mut kinds = Vec::new();
        if cfg!(feature = "tch") {
            kinds.push(Self::Tch);
        }
        if cfg!(feature = "flex") {
            kinds.push(Self::Flex);
        }
        kinds
    }
}

/// The CPU's model name and the vector extensions libtorch's kernels choose by
/// (`/proc/cpuinfo`), e.g. `Intel(R) Xeon(R) Processor (avx2 avx512f amx_tile)`.
pub fn cpu_model() -> String {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let field = |key: &str| {
        info.lines()
            .find(|l| l.starts_with(key))
            .and_then(|l| l.split(':').nth(1))
            .map(str::trim)
    };
    let name = field("model name").unwrap_or("unknown CPU");
    let flags: Vec<&str> = field("flags").unwrap_or("").split_whitespace().collect();
    let isa: Vec<&str> = ["avx2", "avx512f", "avx512_bf16", "amx_tile"]
        .into_iter()
        .filter(|f| flags.contains(f))
        .collect();
    format!("{name} ({})", isa.join(" "))
}

/// `n` CPU threads for this process's backends: libtorch's and the rayon pool (flex). The
/// rayon pool can be sized once per process; later calls keep the first size.
pub fn set_cpu_threads(n: usize) {
    #[cfg(feature = "tch")]
    tch::set_num_threads(n as i32);
    let _ = rayon::ThreadPoolBuilder::new()
        .num_threads(n)
        .build_global();
}

/// The libtorch release the binary was built against (from the libtorch folder or torch
/// package at build time), for a run on `tch`; `None` on other backends or where the build
/// could not tell.
pub fn libtorch_release(backend: BackendKind) -> Option<String> {
    match backend {
        BackendKind::Tch => option_env!("ATTNRES_LIBTORCH").map(str::to_string),
        BackendKind::Flex => None,
    }
}

/// The GPU index of device `name` as `nvidia-smi -i` takes it: `0` for `cuda`, `N` for
/// `cuda:N`, `None` for a CPU.
pub fn gpu_index(name: &str) -> Option<&str> {
    Some(name.strip_prefix("cuda")?.strip_prefix(':').unwrap_or("0"))
}

/// The GPU of device `name` (`cuda`, `cuda:N`) as `nvidia-smi` names it (`NVIDIA H200`),
/// with `, TF32 matmuls` where `TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1` lets libtorch round f32
/// matmuls' inputs to TF32; `None` on a CPU or where `nvidia-smi` cannot tell.
pub fn gpu_model(name: &str) -> Option<String> {
    let index = gpu_index(name)?;
    let gpu = nvidia_smi(&["--query-gpu=name", "-i", index])?;
    let gpu = gpu.trim();
    let tf32 = std::env::var_os("TORCH_ALLOW_TF32_CUBLAS_OVERRIDE").is_some_and(|v| v == "1");
    (!gpu.is_empty()).then(|| format!("{gpu}{}", if tf32 { ", TF32 matmuls" } else { "" }))
}

/// A GPU's dense peak rate in FLOP/s at `precision`, from NVIDIA's data sheets, for the
/// GPUs named here (`gpu` as [`gpu_model`] gives it); the denominator of MFU. `None` for
/// other GPUs and for CPUs, whose peak depends on clocks no file states reliably.
pub fn peak_flops(gpu: &str, precision: Precision) -> Option<f64> {
    // (name contains, f32, tf32, bf16) in TFLOP/s, without sparsity.
    const PEAKS: [(&str, f64, f64, f64); 4] = [
        ("H200", 67.0, 494.7, 989.4),
        ("H100 PCIe", 51.2, 378.0, 756.0),
        ("H100", 67.0, 494.7, 989.4),
        ("A100", 19.5, 156.0, 312.0),
    ];
    let (_, f32_peak, tf32_peak, bf16_peak) = PEAKS.iter().find(|p| gpu.contains(p.0))?;
    let tera = match precision {
        Precision::Bf16 => bf16_peak,
        Precision::F32 if gpu.contains("TF32") => tf32_peak,
        Precision::F32 => f32_peak,
    };
    Some(tera * 1e12)
}

/// `nvidia-smi` with `query` as CSV without header or units, or `None` where it cannot run.
pub fn nvidia_smi(query: &[&str]) -> Option<String> {
    let out = std::process::Command::new("nvidia-smi")
        .args(query)
        .arg("--format=csv,noheader,nounits")
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The device for `kind` and a device name (`cpu`, `cuda`, `cuda:N`), without autodiff.
pub fn device(kind: BackendKind, name: &str) -> Result<Device, BackendError> {
    let cuda_index = match name {
        "cpu" => None,
        "cuda" => Some(0),
        other => match other.strip_prefix("cuda:").map(str::parse::<usize>) {
            Some(Ok(i)) => Some(i),
            _ => return Err(BackendError::BadDevice(other.to_string())),
        },
    };
    match kind {
        BackendKind::Tch => tch_device(cuda_index),
        BackendKind::Flex if cuda_index.is_some() => {
            Err(BackendError::CudaNeedsTch(name.to_string()))
        }
        BackendKind::Flex => flex_device(),
    }
}

#[cfg(feature = "tch")]
#[allow(deprecated)] // burn 0.22 deprecates burn-tch, but it is still our fastest CPU backend.
fn tch_device(cuda_index: Option<usize>) -> Result<Device, BackendError> {
    Ok(match cuda_index {
        Some(i) => {
            // Asking libtorch for a device it does not have panics deep inside a run; ask
            // first, so that `plan` and `run` refuse it before anything is written.
            let count = if tch::Cuda::is_available() {
                tch::Cuda::device_count().max(0) as usize
            } else {
                0
            };
            if i >= count {
                return Err(BackendError::NoCuda {
                    index: i,
                    count,
                    hint: if count == 0 {
                        " (no driver, or a CPU-only libtorch: `make build-cuda` links the CUDA one)"
                    } else {
                        ""
                    },
                });
            }
            Device::libtorch_cuda(i)
        }
        None => Device::libtorch(),
    })
}

#[cfg(not(feature = "tch"))]
fn tch_device(_cuda_index: Option<usize>) -> Result<Device, BackendError> {
    Err(BackendError::TchMissing)
}

#[cfg(feature = "flex")]
fn flex_device() -> Result<Device, BackendError> {
    Ok(Device::flex())
}

#[cfg(not(feature = "flex"))]
fn flex_device() -> Result<Device, BackendError> {
    Err(BackendError::FlexMissing)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peaks_are_known_for_named_gpus_and_precisions_only() {
        assert_eq!(peak_flops("NVIDIA H200", Precision::Bf16), Some(989.4e12));
        assert_eq!(
            peak_flops("NVIDIA H100 PCIe", Precision::F32),
            Some(51.2e12)
        );
        assert_eq!(
            peak_flops("NVIDIA H100 80GB HBM3, TF32 matmuls", Precision::F32),
            Some(494.7e12)
        );
        assert_eq!(peak_flops("NVIDIA GeForce RTX 4090", Precision::F32), None);
    }
}
