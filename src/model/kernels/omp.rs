//! The row kernels' tasks on libtorch's own OpenMP threads (libgomp), found at run time.
//!
//! After each of its parallel operations libtorch leaves its OpenMP threads spinning for a
//! while, waiting for the next; a kernel of ours that ran on the calling thread alone kept the
//! other cores busy spinning, and one that ran on rayon's pool fought those spinning threads
//! for the cores (docs/performance.md). Handing our tasks to the same
//! team, through libgomp's `GOMP_parallel` entry point (the one a C compiler emits for
//! `#pragma omp parallel`), puts them on threads that are awake already.
//!
//! The split is by task, never by thread: each task's result is the same whatever the number
//! of threads, so a run's numbers do not depend on `--threads`. Without libgomp in the
//! process (it comes with libtorch) the tasks run one after another on the calling thread.

use std::ffi::{CStr, c_char, c_int, c_uint, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::{Mutex, OnceLock};

type Parallel = unsafe extern "C" fn(extern "C" fn(*mut c_void), *mut c_void, c_uint, c_uint);
type ThreadQuery = unsafe extern "C" fn() -> c_int;

/// libgomp's entry points, when the process has them.
struct Gomp {
    parallel: Parallel,
    thread_num: ThreadQuery,
    num_threads: ThreadQuery,
}

unsafe extern "C" {
    fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
}

/// glibc's `RTLD_DEFAULT`: search every library the process has loaded.
const RTLD_DEFAULT: *mut c_void = std::ptr::null_mut();

fn symbol(name: &CStr) -> Option<*mut c_void> {
    // SAFETY: dlsym with RTLD_DEFAULT and a NUL-terminated name only looks the name up.
    let p = unsafe { dlsym(RTLD_DEFAULT, name.as_ptr()) };
    (!p.is_null()).then_some(p)
}

fn gomp() -> Option<&'static Gomp> {
    static GOMP: OnceLock<Option<Gomp>> = OnceLock::new();
    GOMP.get_or_init(|| {
        let (parallel, thread_num, num_threads) = (
            symbol(c"GOMP_parallel")?,
            symbol(c"omp_get_thread_num")?,
            symbol(c"omp_get_num_threads")?,
        );
        // SAFETY: libgomp's exported functions, with the C signatures declared above.
        unsafe {
            Some(Gomp {
                parallel: std::mem::transmute::<*mut c_void, Parallel>(parallel),
                thread_num: std::mem::transmute::<*mut c_void, ThreadQuery>(thread_num),
                num_threads: std::mem::transmute::<*mut c_void, ThreadQuery>(num_threads),
            })
        }
    })
    .as_ref()
}

/// What each thread of the team is handed.
struct Job<'a, T> {
    states: &'a [Mutex<T>],
    body: &'a (dyn Fn(usize, &mut T) + Sync),
    gomp: &'a Gomp,
    panic: Mutex<Option<Box<dyn std::any::Any + Send>>>,
}

extern "C" fn run_share<T>(data: *mut c_void) {
    // SAFETY: `data` is the `Job` that `for_each_task` passed, alive until GOMP_parallel
    // returns, and only read here.
    let job = unsafe { &*(data as *const Job<T>) };
    // SAFETY: plain queries of the calling thread's place in its team.
    let (me, team) = unsafe { ((job.gomp.thread_num)(), (job.gomp.num_threads)()) };
    let (me, team) = (me.max(0) as usize, team.max(1) as usize);
    let result = catch_unwind(AssertUnwindSafe(|| {
        for (task, state) in job.states.iter().enumerate().skip(me).step_by(team) {
            let mut state = state.lock().unwrap_or_else(|e| e.into_inner());
            (job.body)(task, &mut state);
        }
    }));
    if let Err(payload) = result {
        *job.panic.lock().unwrap_or_else(|e| e.into_inner()) = Some(payload);
    }
}

/// Runs `body(task, &mut state)` once for every task, each with its own state (its rows of
/// the outputs, its partial sums), on libgomp's threads; returns the states in task order.
pub fn for_each_task<T: Send>(states: Vec<T>, body: &(dyn Fn(usize, &mut T) + Sync)) -> Vec<T> {
    let states: Vec<Mutex<T>> = states.into_iter().map(Mutex::new).collect();
    match gomp() {
        Some(gomp) if states.len() > 1 => {
            let job = Job {
                states: &states,
                body,
                gomp,
                panic: Mutex::new(None),
            };
            // SAFETY: `run_share::<T>` reads `job` only, which outlives the call; 0 threads
            // asks for the team size libtorch set.
            unsafe { (gomp.parallel)(run_share::<T>, &job as *const Job<T> as *mut c_void, 0, 0) };
            if let Some(payload) = job.panic.into_inner().unwrap_or_else(|e| e.into_inner()) {
                resume_unwind(payload);
            }
        }
        _ => {
            for (task, state) in states.iter().enumerate() {
                body(task, &mut state.lock().unwrap_or_else(|e| e.into_inner()));
            }
        }
    }
    states
        .into_iter()
        .map(|m| m.into_inner().unwrap_or_else(|e| e.into_inner()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_task_runs_once_with_its_own_state() {
        // (task, sum of squares) per task.
        let states: Vec<(usize, usize)> = (0..37).map(|i| (i, 0)).collect();
        let out = for_each_task(states, &|task, s: &mut (usize, usize)| {
            assert_eq!(task, s.0);
            s.1 += task * task;
        });
        assert_eq!(out.len(), 37);
        assert!(out.iter().all(|&(i, sq)| sq == i * i));
    }
}
