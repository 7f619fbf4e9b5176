//! One benchmark case in a process of its own: the parent sends `step` lines on stdin and
//! reads back each step's seconds, so that cases are interleaved step by step (drift on a
//! noisy machine hits them alike) while each process's peak memory (`VmHWM`) stays its own.
//! Each timed step follows an untimed one of its own: measured, a step right after another
//! case's ran 7-10 ms slower (tiny inference, batch 16: baseline 30 ms interleaved, 20 ms on
//! its own), which pulled every ratio towards 1. A timed sample covers at least
//! [`MIN_SAMPLE_S`] of steps.

use std::io::{BufRead, Write};
use std::time::Instant;

use anyhow::{Context, bail};
use burn::optim::GradientsParams;
use burn::tensor::Device;
use serde::{Deserialize, Serialize};

use crate::backend::{self, BackendKind, Precision};
use crate::data::Batch;
use crate::model::memory::{MemoryEstimate, training_memory_in};
use crate::model::{Lm, ModelConfig};
use crate::train::config::TrainConfig;
use crate::train::eval::{BatchTensors, masked_cross_entropy};
use crate::train::optimizer;

/// What one child measures.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Case {
    /// The size's name (`reference`, or a sweep's size).
    pub size: String,
    pub label: String,
    pub model: ModelConfig,
    /// Sequences per step (a training micro-batch, or an inference batch).
    pub batch: usize,
    /// Time the inference forward instead of a training step.
    pub inference: bool,
    pub precision: Precision,
    pub threads: Option<usize>,
}

impl Case {
    /// What `plan` estimates one training step of this case holds (docs/cost.md).
    pub fn training_memory(&self) -> MemoryEstimate {
        training_memory_in(&self.model, self.batch, self.precision.bytes())
    }
}

/// What a child says when it ends.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Ended {
    /// Peak memory of the child where it can be told: on a CPU its peak resident memory, on
    /// a GPU what `nvidia-smi` shows it holding at the end (CUDA context and libtorch's
    /// cached blocks, which keep their peak).
    pub peak_bytes: Option<f64>,
    /// Steps per timed sample ([`MIN_SAMPLE_S`]; 1 from a build that predates it, as an
    /// `--against` binary may).
    #[serde(default = "one")]
    pub repeats: usize,
}

impl Ended {
    /// What two processes of one case ended with, in turn: the later's, at the higher peak.
    pub fn then(self, later: Ended) -> Ended {
        Ended {
            peak_bytes: match (self.peak_bytes, later.peak_bytes) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            },
            ..later
        }
    }
}

fn one() -> usize {
    1
}

/// The least time a timed sample covers: a case whose step is shorter runs that many steps
/// back to back per sample and answers their mean. Single forwards of 0.5-8 ms (batch-1
/// inference at the sweep sizes) swung by 2-3x from round to round, which left their
/// ratios unreadable (git log -- docs/performance.md).
pub const MIN_SAMPLE_S: f64 = 0.02;

/// Steps per sample for a case whose quickest of three warm steps took `seconds`.
fn repeats_for(seconds: f64) -> usize {
    (MIN_SAMPLE_S / seconds).ceil().clamp(1.0, 1000.0) as usize
}

/// The child's side: build the case, answer `step` with seconds, end on `end` or EOF.
pub fn serve(kind: BackendKind, device: &str, case: &Case) -> anyhow::Result<()> {
    crate::train::set_threads(case.threads);
    let device_name = device;
    let device = backend::device(kind, device)?;
    backend::set_precision(kind, &device, case.precision)?;
    let mut step = stepper(case, &device)?;
    let quickest = (0..3).try_fold(f64::INFINITY, |t, _| Ok::<_, anyhow::Error>(t.min(step()?)))?;
    let repeats = repeats_for(quickest);
    let mut out = std::io::stdout().lock();
    writeln!(out, "ready")?;
    out.flush()?;
    for line in std::io::stdin().lock().lines() {
        match line?.trim() {
            "step" => {
                // Back to back with an untimed step, so that the timed one finds caches,
                // pages and thread pool warm, as in a training run, rather than cold from
                // the other cases' steps in between.
                step()?;
                let mut seconds = 0.0;
                for _ in 0..repeats {
                    seconds += step()?;
                }
                writeln!(out, "{}", seconds / repeats as f64)?;
                out.flush()?;
            }
            "end" => break,
            other => bail!("bench child: unknown request `{other}`"),
        }
    }
    let ended = Ended {
        peak_bytes: if backend::gpu_index(device_name).is_some() {
            crate::runner::capacity::gpu_memory_of_process(std::process::id())
        } else {
            peak_resident_bytes()
        },
        repeats,
    };
    writeln!(out, "{}", serde_json::to_string(&ended)?)?;
    Ok(())
}

type Step = Box<dyn FnMut() -> anyhow::Result<f64>>;

/// A closure that runs one timed step of `case` and returns its seconds.
fn stepper(case: &Case, device: &Device) -> anyhow::Result<Step> {
    let (b, t) = (case.batch, case.model.context);
    let vocab = case.model.vocab_size;
    let tokens: Vec<i64> = (0..b * (t + 1))
        .map(|i| ((i * 7919) % vocab) as i64)
        .collect();
    let batch = Batch {
        rows: b,
        context: t,
        input: tokens.chunks(t + 1).flat_map(|r| r[..t].to_vec()).collect(),
        target: tokens.chunks(t + 1).flat_map(|r| r[1..].to_vec()).collect(),
        mask: None,
    };
    if case.inference {
        let model = Lm::init(&case.model, 0, device)?;
        let device = device.clone();
        return Ok(Box::new(move || {
            let start = Instant::now();
            let logits = model.forward(BatchTensors::new(&batch, &device).input);
            // Reading a value waits for the forward to finish on asynchronous devices.
            let _ = logits.slice([0..1, 0..1, 0..1]).try_into_scalar::<f32>()?;
            Ok(start.elapsed().as_secs_f64())
        }));
    }
    let train_device = device.clone().autodiff();
    let mut model = Some(Lm::init(&case.model, 0, &train_device)?);
    let train: TrainConfig =
        serde_yaml_ng::from_str("batch_size: 1\nlr: 0.001\nbudget: {tokens: 1}")?;
    let mut optim = optimizer::build(&train, model.as_ref().context("the model")?);
    Ok(Box::new(move || {
        let start = Instant::now();
        let m = model.take().context("the model")?;
        let bt = BatchTensors::new(&batch, &train_device);
        let loss = masked_cross_entropy(m.forward(bt.input), bt.target, None);
        let grads = GradientsParams::from_grads(loss.backward(), &m);
        let _ = loss.try_into_scalar::<f32>()?; // as the trainer reads it: after the backward
        let m = optim.step(1e-3, m, grads);
        // Reading a weight waits for the update to finish on asynchronous devices.
        let _ = m.head.val().slice([0..1, 0..1]).try_into_scalar::<f32>()?;
        model = Some(m);
        Ok(start.elapsed().as_secs_f64())
    }))
}

/// Peak resident memory of this process, from `/proc/self/status` (Linux).
fn peak_resident_bytes() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024.0)
}

/// Makes `command`'s process run on `cpu` only (Linux; a no-op elsewhere).
fn pin_to(command: &mut std::process::Command, cpu: usize) {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::process::CommandExt;
        // SAFETY: between fork and exec the closure makes one system call and allocates
        // nothing.
        unsafe {
            command.pre_exec(move || {
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                libc::CPU_SET(cpu, &mut set);
                if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (command, cpu);
}

/// The CPU this process runs on now (Linux), where one-thread children are pinned together.
pub fn current_cpu() -> Option<usize> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: sched_getcpu takes nothing and returns a CPU number or -1.
        let cpu = unsafe { libc::sched_getcpu() };
        usize::try_from(cpu).ok()
    }
    #[cfg(not(target_os = "linux"))]
    None
}

/// The parent's handle on one child.
pub struct Child {
    process: std::process::Child,
    stdin: std::process::ChildStdin,
    stdout: std::io::BufReader<std::process::ChildStdout>,
    pub case: Case,
}

impl Child {
    /// Starts `attnres bench --serve` for every `(case, binary)` (`binary`: this attnres
    /// binary when `None`) at once, then waits until each has built its model, so that many
    /// children (93 for `--split` on 16 cores) load libtorch side by side, not in turn.
    /// With `pin`, every child runs on that one CPU (Linux; elsewhere where it lands).
    pub fn spawn_all(
        kind: BackendKind,
        device: &str,
        cases: Vec<(Case, Option<&std::path::Path>)>,
        pin: Option<usize>,
    ) -> anyhow::Result<Vec<Self>> {
        let started = cases
            .into_iter()
            .map(|(case, binary)| Self::start(kind, device, case, binary, pin))
            .collect::<anyhow::Result<Vec<_>>>()?;
        started.into_iter().map(Self::ready).collect()
    }

    /// Starts the child's process without waiting for it.
    fn start(
        kind: BackendKind,
        device: &str,
        case: Case,
        binary: Option<&std::path::Path>,
        pin: Option<usize>,
    ) -> anyhow::Result<Self> {
        let exe = match binary {
            Some(path) => path.to_path_buf(),
            None => std::env::current_exe().context("locating the attnres binary")?,
        };
        let mut command = std::process::Command::new(exe);
        command
            .args(["bench", "--backend", kind.name(), "--device", device])
            .args(["--serve", &serde_json::to_string(&case)?])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped());
        if let Some(cpu) = pin {
            pin_to(&mut command, cpu);
        }
        let mut process = command
            .spawn()
            .context("starting a benchmark child process")?;
        let stdin = process.stdin.take().context("the child's stdin")?;
        let stdout = std::io::BufReader::new(process.stdout.take().context("the child's stdout")?);
        Ok(Self {
            process,
            stdin,
            stdout,
            case,
        })
    }

    /// Waits for a started child's `ready`: its model is built.
    fn ready(mut self) -> anyhow::Result<Self> {
        let ready = self.read_line()?;
        if ready != "ready" {
            bail!("bench child for {}: said `{ready}`", self.case.label);
        }
        Ok(self)
    }

    fn read_line(&mut self) -> anyhow::Result<String> {
        let mut line = String::new();
        if self.stdout.read_line(&mut line)? == 0 {
            let status = self.process.wait()?;
            bail!(
                "bench child for {} {} ended ({status}) without answering",
                self.case.size,
                self.case.label
            );
        }
        Ok(line.trim().to_string())
    }

    /// One timed step, in seconds.
    pub fn step(&mut self) -> anyhow::Result<f64> {
        writeln!(self.stdin, "step")?;
        self.stdin.flush()?;
        let line = self.read_line()?;
        line.parse()
            .with_context(|| format!("bench child answered `{line}`"))
    }

    /// Ends the child and returns what it measured of itself.
    pub fn end(mut self) -> anyhow::Result<Ended> {
        writeln!(self.stdin, "end")?;
        self.stdin.flush()?;
        let line = self.read_line()?;
        let _ = self.process.wait();
        serde_json::from_str(&line).with_context(|| format!("bench child answered `{line}`"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pinned child may run on its one CPU only, as the kernel reports it.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_pinned_child_runs_on_the_one_cpu_it_was_given() {
        let cpu = current_cpu().expect("sched_getcpu on Linux");
        let mut command = std::process::Command::new("cat");
        command.arg("/proc/self/status");
        pin_to(&mut command, cpu);
        let out = command.output().expect("running cat");
        let status = String::from_utf8(out.stdout).unwrap();
        let allowed = status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .expect("Cpus_allowed_list")
            .trim();
        assert_eq!(allowed, cpu.to_string(), "{status}");
    }

    #[test]
    fn short_steps_repeat_to_fill_a_sample() {
        assert_eq!(repeats_for(0.5), 1);
        assert_eq!(repeats_for(MIN_SAMPLE_S), 1);
        assert_eq!(repeats_for(0.0021), 10);
        assert_eq!(repeats_for(0.0004), 50);
        assert_eq!(repeats_for(0.0), 1000);
    }
}
