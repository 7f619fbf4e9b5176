//! The training loop: data, model and optimizer set-up, resume, steps, evals, checkpoints.

use std::time::Instant;

use anyhow::{Context, bail};
use burn::module::Module;
use burn::optim::{GradientsAccumulator, GradientsParams};
use burn::tensor::Device;

use super::eval::{BatchTensors, evaluate, masked_cross_entropy, probe};
use super::optimizer;
use super::run_spec::RunSpec;
use super::{Outcome, TrainOptions};
use crate::backend;
use crate::data::{self, Batch, Dataset, eval_batches, train_batch, whole_split_batches};
use crate::error::InputError;
use crate::model::Lm;
use crate::model::flops::param_counts;
use crate::store::metrics::{self, DepthRow, LayerRow, StepRow};
use crate::store::{RunDir, Status, read_json_opt, write_json};

mod lifecycle;
mod records;

/// Trains `spec` into `dir`, resuming from its checkpoint; a finished folder is left alone.
pub fn train(spec: &RunSpec, dir: &RunDir, opts: &TrainOptions) -> anyhow::Result<Outcome> {
    validate(spec)?;
    dir.create()?;
    match read_json_opt::<RunSpec>(&dir.spec())? {
        Some(existing) if existing != *spec => bail!(InputError::file(
            &dir.root,
            "holds a different run (its spec.json differs); use another folder"
        )),
        Some(_) => {}
        None => write_json(&dir.spec(), spec)?,
    }
    if let Some(Status::Done { .. }) = dir.read_status()? {
        return Ok(Outcome::AlreadyDone);
    }
    let data = data::load(&spec.data, spec.model.context, spec.seed)
        .map_err(|e| InputError::run(spec.run_id(), format!("data: {e}")))?;
    if data.vocab_size > spec.model.vocab_size {
        bail!(InputError::run(
            spec.run_id(),
            format!(
                "model.vocab_size {} is smaller than the tokenizer's vocabulary {}; raise it",
                spec.model.vocab_size, data.vocab_size
            )
        ));
    }
    if let Some(file) = data.tokenizer.file() {
        std::fs::copy(file, dir.tokenizer())
            .with_context(|| format!("copying {}", file.display()))?;
    }
    set_threads(opts.threads);
    let device = backend::device(opts.backend, &opts.device)?;
    backend::set_precision(opts.backend, &device, spec.train.precision)
        .map_err(|e| InputError::run(spec.run_id(), e))?;
    Trainer::new(spec, dir, opts, &data, device)?.run()
}

fn validate(spec: &RunSpec) -> anyhow::Result<()> {
    spec.model
        .validate()
        .map_err(|e| InputError::run(spec.run_id(), format!("model: {e}")))?;
    spec.train.validate().map_err(|(key, problem)| {
        InputError::run(spec.run_id(), format!("train.{key}: {problem}"))
    })?;
    Ok(())
}

/// Sets the backend's CPU threads (libtorch and the rayon pool) for this process, and has
/// each of libtorch's threads make its first call into MKL's vector math alone
/// (`kernels::warm_up_vml`).
pub fn set_threads(threads: Option<usize>) {
    if let Some(n) = threads {
        backend::set_cpu_threads(n);
    }
    // Before any two of libtorch's threads first call MKL's vector math at once.
    #[cfg(feature = "tch")]
    crate::model::kernels::warm_up_vml();
}

struct Trainer<'a> {
    spec: &'a RunSpec,
    dir: &'a RunDir,
    opts: &'a TrainOptions,
    data: &'a Dataset,
    device: Device,
    eval: Vec<Batch>,
    layers: Vec<LayerRow>,
    depth: Vec<DepthRow>,
    total_steps: u64,
    /// The device's peak FLOP/s at the run's precision, where known (for MFU).
    peak_flops: Option<f64>,
}

impl<'a> Trainer<'a> {
    fn new(
        spec: &'a RunSpec,
        dir: &'a RunDir,
        opts: &'a TrainOptions,
        data: &'a Dataset,
        device: Device,
    ) -> anyhow::Result<Self> {
        let (c, t) = (&spec.train, spec.model.context);
        Ok(Self {
            eval: eval_batches(&data.val, c.eval_batches, c.batch_size, t),
            spec,
            dir,
            opts,
            data,
            device,
            layers: Vec::new(),
            depth: Vec::new(),
            total_steps: spec.total_steps(),
            peak_flops: backend::gpu_model(&opts.device)
                .and_then(|gpu| backend::peak_flops(&gpu, spec.train.precision)),
        })
    }

    fn run(mut self) -> anyhow::Result<Outcome> {
        let (spec, dir) = (self.spec, self.dir);
        let (mut model, mut optim, mut state) = self.restore()?;
        dir.write_status(&Status::Running {
            step: state.step,
            total_steps: self.total_steps,
        })?;
        let mut events = self.open_events(&state)?;
        let bar = self.progress_bar(state.step);
        self.say_resumed(&bar, state.step);
        let (per_token, six_n) = (
            crate::model::flops::flops_per_token(&spec.model).training() as f64,
            6.0 * param_counts(&spec.model).non_embedding as f64,
        );
        let started = Instant::now() - std::time::Duration::from_secs_f64(state.wall_s);
        while state.step < self.total_steps {
            let step_start = Instant::now();
            let rows = spec.sequences_in_step(state.step);
            let (loss, mut grads) = self.gradients(&model, state.step, rows)?;
            if !loss.is_finite() {
                return self.failed(&bar, state.step + 1, loss);
            }
            let done = state.step + 1;
            let eval_now =
                done.is_multiple_of(spec.train.eval_every as u64) || done == self.total_steps;
            // The probe is the raw gradient, before clipping rescales it.
            let grad_norms = eval_now
                .then(|| optimizer::layer_grad_norms(&model, &grads))
                .transpose()?;
            let norm = optimizer::clip_grads(&model, &mut grads, spec.train.grad_clip as f32)?;
            let lr = spec.train.lr_at(state.step, self.total_steps);
            model = optim.step(lr, model, grads);
            state.step = done;
            state.tokens += (rows * spec.model.context) as u64;
            state.wall_s = started.elapsed().as_secs_f64();
            let mut row = StepRow {
                step: done,
                tokens: state.tokens,
                lr,
                loss_train: loss,
                loss_val: None,
                acc_val: None,
                flops_exact: per_token * state.tokens as f64,
                flops_6nd: six_n * state.tokens as f64,
                wall_s: state.wall_s,
                tokens_per_s: (rows * spec.model.context) as f64
                    / step_start.elapsed().as_secs_f64(),
                grad_norm: Some(norm),
            };
            if self.lost() {
                bar.abandon_with_message(format!("lease lost at step {}", state.step));
                return Ok(Outcome::Lost { step: state.step });
            }
            if let Some(grad_norms) = grad_norms {
                self.evaluate(&model, done, &grad_norms, &mut row)?;
            }
            metrics::append_steps(&dir.steps(), std::slice::from_ref(&row))?;
            self.log_events(events.as_mut(), &row)?;
            let stop = self.stop_asked();
            self.checkpoint_if_due(&model, &optim, &state, stop)?;
            if stop && done < self.total_steps {
                bar.abandon_with_message(format!("stopped at step {done}: checkpointed"));
                return Ok(Outcome::Stopped { step: done });
            }
            bar.set_position(done);
            bar.set_message(records::progress_message(&row));
        }
        bar.finish();
        if self.lost() {
            return Ok(Outcome::Lost { step: state.step });
        }
        let final_val = self.final_validation(&model)?;
        self.log_final_events(events.as_mut(), &state, final_val.loss)?;
        let summary = self.summarize(&state, final_val)?;
        write_json(&dir.summary(), &summary)?;
        dir.write_status(&Status::Done { steps: state.step })?;
        Ok(Outcome::Done(Box::new(summary)))
    }

    /// Validation loss into `row`, and the probes of step `done` into the metrics files.
    fn evaluate(
        &mut self,
        model: &Lm,
        done: u64,
        grad_norms: &[f32],
        row: &mut StepRow,
    ) -> anyhow::Result<()> {
        let inference = model.valid();
        let result = evaluate(&inference, &self.eval, &self.device)?;
        row.loss_val = Some(result.loss);
        row.acc_val = result.accuracy;
        let probes = probe(&inference, &self.eval[0], &self.device)?;
        self.record_probes(done, &probes, grad_norms);
        metrics::write_layers(&self.dir.layers(), &self.layers)?;
        metrics::write_depth(&self.dir.depth_attn(), &self.depth)?;
        Ok(())
    }

    /// The finished model on the whole validation split, in batches of `train.batch_size`.
    fn final_validation(&self, model: &Lm) -> anyhow::Result<super::FinalVal> {
        let start = Instant::now();
        let (rows, context) = (self.spec.train.batch_size, self.spec.model.context);
        let batches = whole_split_batches(&self.data.val, rows, context);
        let result = evaluate(&model.valid(), &batches, &self.device)?;
        Ok(super::FinalVal {
            loss: result.loss,
            acc: result.accuracy,
            bpb: self.bits_per_byte(result.loss),
            tokens: batches.iter().map(|b| b.scored() as u64).sum(),
            wall_s: start.elapsed().as_secs_f64(),
        })
    }

    /// Loss and gradients of one step, accumulated over micro-batches so that the result
    /// equals one batch of `rows` sequences (weighted by scored tokens).
    fn gradients(
        &self,
        model: &Lm,
        step: u64,
        rows: usize,
    ) -> anyhow::Result<(f32, GradientsParams)> {
        let spec = self.spec;
        let batches: Vec<Batch> = micro_sizes(rows, spec.train.micro_batches)
            .into_iter()
            .enumerate()
            .map(|(m, size)| {
                train_batch(
                    &self.data.train,
                    spec.seed,
                    step,
                    m as u64,
                    size,
                    spec.model.context,
                )
            })
            .collect();
        let scored: usize = batches.iter().map(Batch::scored).sum();
        let train_device = self.device.clone().autodiff();
        let mut accumulator = GradientsAccumulator::new();
        let mut total = 0.0f32;
        for batch in &batches {
            let weight = batch.scored() as f32 / scored.max(1) as f32;
            let t = BatchTensors::new(batch, &train_device);
            let loss =
                masked_cross_entropy(model.forward(t.input), t.target, t.mask).mul_scalar(weight);
            let grads = GradientsParams::from_grads(loss.backward(), model);
            // Read once the backward is queued: on a GPU a read waits for the device, and
            // read between the passes it kept the host from queueing the backward meanwhile.
            total += loss.try_into_scalar::<f32>()?;
            accumulator.accumulate(model, grads);
        }
        Ok((total, accumulator.grads()))
    }
}

/// Sequences per micro-batch for a step of `rows` sequences cut into at most `micro`
/// micro-batches: sizes differ by at most one and add up to `rows` exactly (a short last
/// step of 5 sequences in 4 micro-batches is 2, 1, 1, 1, not 2, 2, 1 and an underflow).
fn micro_sizes(rows: usize, micro: usize) -> Vec<usize> {
    let n = micro.clamp(1, rows.max(1));
    (0..n)
        .map(|m| rows / n + usize::from(m < rows % n))
        .filter(|&s| s > 0)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::micro_sizes;

    #[test]
    fn micro_batches_add_up_to_the_step_including_a_short_last_step() {
        assert_eq!(micro_sizes(8, 4), vec![2, 2, 2, 2]);
        assert_eq!(micro_sizes(5, 4), vec![2, 1, 1, 1]);
        assert_eq!(micro_sizes(3, 4), vec![1, 1, 1]);
        assert_eq!(micro_sizes(16, 1), vec![16]);
        for rows in 1..40 {
            for micro in 1..9 {
                let s = micro_sizes(rows, micro);
                assert_eq!(s.iter().sum::<usize>(), rows, "{rows} rows in {micro}");
                assert!(s.len() <= micro && s.iter().all(|&x| x > 0));
            }
        }
    }
}
