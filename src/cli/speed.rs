//! The training speed behind `plan`'s and `power`'s times, measured on a sweep's finished
//! runs or assumed, and how those times are written.

use std::path::Path;

use crate::backend::gpu_index;
use crate::train::Summary;

/// Training speed of one CPU core assumed by `plan` before any run of the sweep has finished
/// (tch, one 1-thread run per core, small models); finished runs replace it with their
/// measured speed. A 2-core Intel Xeon trained the quick sweep at 57 and the scaling sweep at
/// 71 GFLOP/s a core on 2 cores (sweeps/quick.yaml and scaling.yaml's measured times).
const ASSUMED_FLOPS_PER_CORE_S: f64 = 60e9;

/// The same on one GPU: gpu-scaling's step times on one H200 in f32 (docs/gpu.md) came to
/// about 21 TFLOP/s over the sweep, its `medium` baseline run end to end to 18.5.
const ASSUMED_GPU_FLOPS_PER_S: f64 = 20e12;

/// The training speed behind `plan`'s and `power`'s times: measured on the sweep's finished
/// runs on the same kind of device, else assumed.
pub(super) struct Speed {
    pub(super) flops_per_s: f64,
    measured: bool,
    /// Whether the runs train on a GPU (else on all `cores` of a CPU).
    gpu: bool,
    cores: usize,
}

impl Speed {
    /// For runs on `device` (`cpu`, `cuda`, `cuda:N`) of the sweep whose run folders are in
    /// `root`.
    pub(super) fn of(root: &Path, device: &str) -> Self {
        Self::over(&finished_summaries(root), gpu_index(device).is_some())
    }

    /// For runs on the kind of device the sweep's finished runs trained on (a GPU if any of
    /// them did), for commands that take no `--device`.
    pub(super) fn of_finished(root: &Path) -> Self {
        let finished = finished_summaries(root);
        let gpu = finished.iter().any(|s| gpu_index(&s.device).is_some());
        Self::over(&finished, gpu)
    }

    /// Measured over the `finished` runs on a GPU (`gpu`) or on a CPU, else assumed.
    fn over(finished: &[Summary], gpu: bool) -> Self {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let measured = measured_speed(finished, cores, gpu);
        let assumed = if gpu {
            ASSUMED_GPU_FLOPS_PER_S
        } else {
            ASSUMED_FLOPS_PER_CORE_S * cores as f64
        };
        Self {
            flops_per_s: measured.unwrap_or(assumed),
            measured: measured.is_some(),
            gpu,
            cores,
        }
    }

    /// `at 120 GFLOP/s with all 2 cores busy (assumed, the same for every arm; ...)`.
    pub(super) fn text(&self) -> String {
        format!(
            "at {:.0} GFLOP/s {} ({})",
            self.flops_per_s / 1e9,
            if self.gpu {
                "on one GPU".to_string()
            } else {
                format!("with all {} cores busy", self.cores)
            },
            match (self.measured, self.gpu) {
                (true, _) => "measured on finished runs",
                (false, true) => "assumed from one H200 in f32; measured once runs finish",
                // The assumption is one speed for every arm; the slower ones (the
                // hyper-connection families, Full AttnRes's ablations) take longer.
                (false, false) => {
                    "assumed, the same for every arm; measured once runs finish, or \
                     beforehand, arm by arm, by `attnres bench --split --sizes SWEEP`"
                }
            }
        )
    }
}

/// The summaries of the finished runs whose folders are in `root`.
fn finished_summaries(root: &Path) -> Vec<Summary> {
    std::fs::read_dir(root)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| crate::store::read_json::<Summary>(&e.path().join("summary.json")).ok())
        .collect()
}

/// The speed of this machine, measured on a sweep's `finished` runs and weighted by FLOPs so
/// that the large runs, which decide the time left, dominate the small ones. With `gpu`, the
/// FLOPs per second of the runs trained on a GPU, one at a time; else the FLOPs per
/// thread-second of the others (a run with `--jobs 2` on two cores had one thread) times
/// `cores`, all of them busy.
fn measured_speed(finished: &[Summary], cores: usize, gpu: bool) -> Option<f64> {
    let (mut flops, mut thread_seconds) = (0.0, 0.0);
    for s in finished {
        if s.wall_s > 0.0 && gpu_index(&s.device).is_some() == gpu {
            let threads = if gpu {
                1
            } else {
                s.threads.unwrap_or(cores).max(1)
            };
            flops += s.flops_exact;
            thread_seconds += s.wall_s * threads as f64;
        }
    }
    let busy = if gpu { 1 } else { cores };
    (thread_seconds > 0.0).then(|| flops / thread_seconds * busy as f64)
}

/// `95` -> `1m35s`, `7300` -> `2h01m`.
pub(super) fn duration(seconds: f64) -> String {
    let s = seconds.round() as u64;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gpu_plan_assumes_a_gpu_speed_and_counts_no_cores() {
        let empty = std::env::temp_dir().join("attnres-no-such-results");
        let gpu = Speed::of(&empty, "cuda:0");
        assert_eq!(gpu.flops_per_s, ASSUMED_GPU_FLOPS_PER_S);
        assert!(gpu.text().contains("on one GPU"), "{}", gpu.text());
        assert!(!gpu.text().contains("cores"), "{}", gpu.text());
        let cpu = Speed::of(&empty, "cpu");
        assert_eq!(cpu.flops_per_s, ASSUMED_FLOPS_PER_CORE_S * cpu.cores as f64);
        assert!(cpu.text().contains("cores busy"), "{}", cpu.text());
        assert!(cpu.text().contains("bench --split"), "{}", cpu.text());
    }
}
