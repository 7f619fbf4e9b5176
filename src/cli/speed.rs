//! The training speed behind `power`'s times, measured on a sweep's finished
//! runs or assumed, and how those times are written.

use std::path::Path;

use crate::backend::gpu_index;
use crate::runner::eta::{assumed_speed, machine_speed};
use crate::train::Summary;

/// The training speed behind `power`'s times (`plan`'s is runner::eta's, per size):
/// measured on the sweep's finished runs on the same kind of device, else assumed.
pub(super) struct Speed {
    pub(super) flops_per_s: f64,
    measured: bool,
    /// Whether the runs train on a GPU (else on all `cores` of a CPU).
    gpu: bool,
    cores: usize,
}

impl Speed {
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
        let measured = machine_speed(finished.iter(), cores, gpu);
        Self {
            flops_per_s: measured.unwrap_or_else(|| assumed_speed(gpu, cores)),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::eta::{ASSUMED_FLOPS_PER_CORE_S, ASSUMED_GPU_FLOPS_PER_S};

    #[test]
    fn a_gpu_plan_assumes_a_gpu_speed_and_counts_no_cores() {
        let gpu = Speed::over(&[], true);
        assert_eq!(gpu.flops_per_s, ASSUMED_GPU_FLOPS_PER_S);
        assert!(gpu.text().contains("on one GPU"), "{}", gpu.text());
        assert!(!gpu.text().contains("cores"), "{}", gpu.text());
        let cpu = Speed::over(&[], false);
        assert_eq!(cpu.flops_per_s, ASSUMED_FLOPS_PER_CORE_S * cpu.cores as f64);
        assert!(cpu.text().contains("cores busy"), "{}", cpu.text());
        assert!(cpu.text().contains("bench --split"), "{}", cpu.text());
    }
}
