//! How much memory one run may use here: the machine's RAM (from `/proc/meminfo`) or a CUDA
//! device's memory (from `nvidia-smi`), shared by the runs trained at once.

use crate::spec::MemoryLimit;

/// The memory limit for each of `jobs` runs trained at once on `device` (`cpu`, `cuda`,
/// `cuda:N`), or `None` where this machine cannot tell (no `/proc/meminfo`, no `nvidia-smi`).
pub fn memory_limit(device: &str, jobs: usize) -> Option<MemoryLimit> {
    let jobs = jobs.max(1);
    let (bytes, what) = match crate::backend::gpu_index(device) {
        Some(index) => {
            let gpu = gpu_memory(index)?;
            (
                gpu,
                format!("the {} of GPU {index}", crate::fmt::bytes_text(gpu)),
            )
        }
        None => {
            let ram = ram_bytes(&std::fs::read_to_string("/proc/meminfo").ok()?)?;
            (
                ram,
                format!("this machine's {} of RAM", crate::fmt::bytes_text(ram)),
            )
        }
    };
    Some(if jobs == 1 {
        MemoryLimit { bytes, what }
    } else {
        MemoryLimit {
            bytes: bytes / jobs as f64,
            what: format!("a 1/{jobs} share of {what} (--jobs {jobs})"),
        }
    })
}

/// Runs trained at once when `--jobs` is not given, and the sentence that says why.
///
/// On a CPU, one single-threaded run per core: on this project's 2-core machine two
/// one-thread runs side by side trained the quick sweep faster than one run on both cores
/// (docs/performance.md, "Jobs or threads"), because these small models use a second thread
/// poorly; other core counts keep the rule unmeasured (`bench --split` measures them). With
/// `--threads T`, `cores / T` runs. On a GPU, one run at a time (`--jobs N` shares it).
/// `runs` caps the count; memory is checked by the caller.
pub fn default_jobs(
    device: &str,
    threads: Option<usize>,
    cores: usize,
    runs: usize,
) -> (usize, String) {
    if crate::backend::gpu_index(device).is_some() {
        return (
            1,
            format!("jobs: 1 at a time on {device} (--jobs N shares it)"),
        );
    }
    let threads = threads.unwrap_or(1).max(1);
    let jobs = (cores / threads).clamp(1, runs.max(1));
    let why = format!(
        "jobs: {jobs} at once x {threads} thread{} (the default on {cores} core{}: one-thread runs \
         side by side trained small models faster than one run on every core, measured on 2 \
         cores, docs/performance.md; `attnres bench --split --sizes SWEEP` measures this \
         machine's splits; --jobs N --threads T overrides)",
        if threads == 1 { "" } else { "s" },
        if cores == 1 { "" } else { "s" },
    );
    (jobs, why)
}

/// `MemTotal` of a `/proc/meminfo` text, in bytes.
fn ram_bytes(meminfo: &str) -> Option<f64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024.0)
}

/// Total memory of GPU `index`, in bytes, as `nvidia-smi` reports it (MiB).
fn gpu_memory(index: &str) -> Option<f64> {
    let mib: f64 = crate::backend::nvidia_smi(&["--query-gpu=memory.total", "-i", index])?
        .trim()
        .parse()
        .ok()?;
    Some(mib * 1024.0 * 1024.0)
}

/// The GPU memory process `pid` holds now, in bytes, as `nvidia-smi` reports it (MiB): its
/// CUDA context and everything libtorch's caching allocator has kept, which holds on to the
/// blocks of its peak until the process ends.
pub fn gpu_memory_of_process(pid: u32) -> Option<f64> {
    let table = crate::backend::nvidia_smi(&["--query-compute-apps=pid,used_memory"])?;
    let mib: f64 = table
        .lines()
        .filter_map(|l| l.split_once(','))
        .filter(|(p, _)| p.trim().parse() == Ok(pid))
        .map(|(_, m)| m.trim().parse::<f64>().ok())
        .sum::<Option<f64>>()?;
    (mib > 0.0).then_some(mib * 1024.0 * 1024.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_jobs_fill_the_cores_with_one_thread_runs_on_cpu_only() {
        assert_eq!(default_jobs("cpu", None, 2, 9).0, 2);
        assert_eq!(default_jobs("cpu", None, 16, 9).0, 9, "capped by the runs");
        assert_eq!(default_jobs("cpu", Some(4), 16, 9).0, 4);
        assert_eq!(default_jobs("cpu", Some(4), 2, 9).0, 1);
        assert_eq!(default_jobs("cuda:0", None, 16, 9).0, 1);
        let why = default_jobs("cpu", None, 16, 36).1;
        assert!(why.contains("16 at once x 1 thread"), "{why}");
        assert!(why.contains("bench --split"), "names how to measure: {why}");
        assert!(
            default_jobs("cpu", None, 2, 9)
                .1
                .contains("2 at once x 1 thread")
        );
    }

    #[test]
    fn reads_mem_total_in_bytes() {
        let text = "MemTotal:       24576000 kB\nMemFree:         1000 kB\n";
        assert_eq!(ram_bytes(text), Some(24576000.0 * 1024.0));
        assert_eq!(ram_bytes("MemFree: 1 kB\n"), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn parallel_runs_share_the_machine() {
        let one = memory_limit("cpu", 1).expect("Linux has /proc/meminfo");
        let two = memory_limit("cpu", 2).expect("Linux has /proc/meminfo");
        assert!((one.bytes / two.bytes - 2.0).abs() < 1e-9);
        assert!(two.what.contains("--jobs 2"), "{}", two.what);
    }
}
