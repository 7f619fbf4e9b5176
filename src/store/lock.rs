//! One lock per run folder, so two `run` processes (or two jobs of one) never train the same
//! run. It is an advisory `flock` on `RUN/lock`: the kernel drops it when the holder exits
//! or crashes, so a lock can never be left stuck.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::fd::AsRawFd;

use super::{RunDir, StoreError};

/// Held while training; released on drop (or by the kernel if the process dies).
#[derive(Debug)]
pub struct RunLock {
    _file: File,
}

fn open(dir: &RunDir) -> Result<File, StoreError> {
    let path = dir.root.join("lock");
    OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(&path)
        .map_err(|e| StoreError::io(&path, e))
}

fn try_flock(file: &File) -> bool {
    // SAFETY: flock on a valid, owned file descriptor has no memory-safety preconditions.
    unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) == 0 }
}

impl RunLock {
    /// Takes the run's lock, or returns None if another process or job holds it.
    pub fn try_acquire(dir: &RunDir) -> Result<Option<Self>, StoreError> {
        dir.create()?;
        let mut file = open(dir)?;
        if !try_flock(&file) {
            return Ok(None);
        }
        let who = format!(
            "pid {} since {}\n",
            std::process::id(),
            humantime::format_rfc3339_seconds(std::time::SystemTime::now())
        );
        let path = dir.root.join("lock");
        file.set_len(0).map_err(|e| StoreError::io(&path, e))?;
        file.write_all(who.as_bytes())
            .map_err(|e| StoreError::io(&path, e))?;
        Ok(Some(Self { _file: file }))
    }

    /// Who holds the run's lock right now, if anyone (`pid N since T`).
    pub fn holder(dir: &RunDir) -> Option<String> {
        if !dir.root.join("lock").exists() {
            return None;
        }
        let mut file = open(dir).ok()?;
        if try_flock(&file) {
            return None; // nobody held it; ours is released when `file` drops
        }
        let mut who = String::new();
        file.rewind().ok()?;
        file.read_to_string(&mut who).ok()?;
        Some(who.trim().to_string())
    }
}
