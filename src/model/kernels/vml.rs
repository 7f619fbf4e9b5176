//! MKL's vector math (VML), which libtorch's elementwise `exp` and `log` call on the CPU,
//! made ready on every thread of libtorch's OpenMP team one thread at a time, before any
//! two threads first call it at once.
//!
//! Measured (tch on this project's 2-core Xeon; git log -- docs/performance.md): in about
//! one training process of 600, the first `exp` of the run, which libtorch splits over both
//! threads (the log-softmax of the first step's loss under autodiff), came back with the
//! second thread's half up to 1.1e-4 off instead of 3e-8 (an error like that of VML's
//! reduced-accuracy modes), from logits that were the same bits as in every other process.
//! That step's loss moved in its fifth digit and the weights after it in their last bits,
//! which failed the kill-resume test's bit-for-bit comparison now and then. The next steps'
//! losses, each from another `exp` of the same size, came out exact, so it is the first
//! call that two threads make at once that goes wrong; each thread makes its first call
//! alone here instead.

use std::sync::Mutex;

use super::omp::for_each_task;

/// Tasks handed to the team: task `i` runs on thread `i mod team`, so every thread of a
/// team of up to this many gets one.
const TASKS: usize = 256;

/// Calls libtorch's `exp` and `log` on a few floats from every thread of the team in turn:
/// 256 pairs of operations on 16 floats, far less than one training step. It changes no
/// result of a correct run.
pub fn warm_up_vml() {
    let one_at_a_time = Mutex::new(());
    for_each_task(vec![(); TASKS], &|_, _| {
        let _turn = one_at_a_time.lock().unwrap_or_else(|e| e.into_inner());
        let x = tch::Tensor::from_slice(&[-0.5f32; 16]);
        let _ = x.exp().log();
    });
}
