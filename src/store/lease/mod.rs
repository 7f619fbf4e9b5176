//! The lease that keeps two runners from training one run, on one machine or on many that
//! share a filesystem (NFS, where `flock` is not to be trusted).
//!
//! `RUN/lease.json` names its holder (host, pid, Slurm job, a random token) and a heartbeat
//! that the holder refreshes while it trains. It is created with `link(2)`, which is atomic
//! on NFS as on local disks, so of two claimants exactly one gets it. A lease is taken over
//! only when its holder is dead: its heartbeat is older than [`LeaseTiming::stale_after`], or
//! it is this host's and its pid is gone, or it is an earlier attempt of this very Slurm task
//! (`SLURM_RESTART_COUNT` below ours: Slurm runs one attempt at a time). A takeover
//! goes through a second link, `lease.takeover`, so two claimants never take one stale lease
//! together. A holder that finds its lease replaced (it stalled for longer than
//! `stale_after`), or that cannot refresh it for half of that time, sets its `lost` flag and
//! stops without writing another byte into the run folder. Comparing heartbeats across hosts
//! assumes clocks within a few seconds of each other (NTP), far below `stale_after`.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

use super::{RunDir, StoreError, read_json};

mod holder;
pub use holder::Holder;
use holder::rfc3339;

/// How often a holder refreshes its lease, and when a silent one counts as dead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseTiming {
    pub heartbeat: Duration,
    pub stale_after: Duration,
}

impl Default for LeaseTiming {
    /// A heartbeat every 15 s; dead after 2 minutes of silence (eight missed heartbeats).
    fn default() -> Self {
        Self {
            heartbeat: Duration::from_secs(15),
            stale_after: Duration::from_secs(120),
        }
    }
}

/// The result of a claim.
#[derive(Debug)]
pub enum Claim {
    Held(Lease),
    /// A live holder has it (or is taking it over from a dead one).
    Busy(Holder),
}

/// A held lease: refreshed by a thread of its own until dropped, then removed.
#[derive(Debug)]
pub struct Lease {
    path: PathBuf,
    token: String,
    lost: Arc<AtomicBool>,
    done: Arc<AtomicBool>,
    beat: Option<JoinHandle<()>>,
}

fn lease_path(dir: &RunDir) -> PathBuf {
    dir.root.join("lease.json")
}

impl Lease {
    /// Claims the run for this process with the default timing.
    pub fn try_acquire(dir: &RunDir) -> Result<Claim, StoreError> {
        Self::try_acquire_as(dir, Holder::me(), LeaseTiming::default())
    }

    /// Claims the run for `me`; gives up (Busy) rather than waits when a live holder has it.
    pub fn try_acquire_as(
        dir: &RunDir,
        me: Holder,
        timing: LeaseTiming,
    ) -> Result<Claim, StoreError> {
        dir.create()?;
        let path = lease_path(dir);
        let mine = dir.root.join(format!("lease.{}.tmp", me.token));
        write_holder(&mine, &me)?;
        let claim = claim(&path, &mine, &me, timing);
        let _ = fs::remove_file(&mine);
        match claim? {
            None => Ok(Claim::Held(Self::start(path, me, timing))),
            Some(holder) => Ok(Claim::Busy(holder)),
        }
    }

    fn start(path: PathBuf, me: Holder, timing: LeaseTiming) -> Self {
        let lost = Arc::new(AtomicBool::new(false));
        let done = Arc::new(AtomicBool::new(false));
        let token = me.token.clone();
        let beat = {
            let (path, lost, done) = (path.clone(), lost.clone(), done.clone());
            std::thread::spawn(move || heartbeat(&path, me, timing, &lost, &done))
        };
        Self {
            path,
            token,
            lost,
            done,
            beat: Some(beat),
        }
    }

    /// Set once the lease is no longer this process's: stop, and write nothing more.
    pub fn lost_flag(&self) -> Arc<AtomicBool> {
        self.lost.clone()
    }

    /// The live holder of a run's lease, if any (a stale lease has none).
    pub fn holder(dir: &RunDir) -> Option<Holder> {
        let holder = read_holder(&lease_path(dir)).ok()?;
        let observer = Holder::me();
        (!holder.is_dead(&observer, SystemTime::now(), LeaseTiming::default())).then_some(holder)
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.done.store(true, Ordering::SeqCst);
        if let Some(beat) = self.beat.take() {
            beat.thread().unpark();
            let _ = beat.join();
        }
        // Remove it only if it is still ours: a taker's lease is not ours to delete.
        if read_holder(&self.path).is_ok_and(|h| h.token == self.token) {
            let _ = fs::remove_file(&self.path);
        }
    }
}

/// The claim itself: `None` when `me` now holds `path`, else the holder that keeps it.
fn claim(
    path: &Path,
    mine: &Path,
    me: &Holder,
    timing: LeaseTiming,
) -> Result<Option<Holder>, StoreError> {
    // Three rounds: a lease released or taken over between our look and our link is looked
    // at again rather than reported as busy.
    let mut last = None;
    for _ in 0..3 {
        if link_new(mine, path)? {
            // NFS may report a link that failed as done, or the reverse: read it back.
            match read_holder(path) {
                Ok(h) if h.token == me.token => return Ok(None),
                Ok(h) => return Ok(Some(h)),
                Err(_) => continue,
            }
        }
        let holder = match read_holder(path) {
            Ok(h) => h,
            // Released or taken over meanwhile; asking `path.exists()` after the read, as
            // before, could see a racer's new lease and report the gone one as an error.
            Err(StoreError::Io { error, .. }) if error.kind() == std::io::ErrorKind::NotFound => {
                continue;
            }
            Err(_) if !path.exists() => continue,
            Err(e) => return Err(e),
        };
        if !holder.is_dead(me, SystemTime::now(), timing) {
            return Ok(Some(holder));
        }
        take_over(path, mine, &holder, timing)?;
        last = Some(holder);
    }
    // Still contended after three rounds: report whoever holds it now.
    Ok(Some(
        read_holder(path)
            .ok()
            .or(last)
            .unwrap_or_else(|| me.clone()),
    ))
}

/// Removes the dead `holder`'s lease, guarded by `lease.takeover` so that of two claimants
/// only one removes it (the other would remove the winner's new lease). A marker left by a
/// taker that died is cleared once it is stale.
fn take_over(
    path: &Path,
    mine: &Path,
    holder: &Holder,
    timing: LeaseTiming,
) -> Result<(), StoreError> {
    let marker = path.with_file_name("lease.takeover");
    if !link_new(mine, &marker)? {
        let age = fs::metadata(&marker)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| SystemTime::now().duration_since(t).ok());
        if age.is_some_and(|a| a > timing.stale_after) {
            let _ = fs::remove_file(&marker);
        }
        return Ok(());
    }
    // Still the same dead holder (not a fresh lease made since we looked)?
    if read_holder(path).is_ok_and(|h| h.token == holder.token) {
        fs::remove_file(path).map_err(|e| StoreError::io(path, e))?;
    }
    fs::remove_file(&marker).map_err(|e| StoreError::io(&marker, e))
}

/// `link(from, to)`: true if `to` was made, false if it existed.
fn link_new(from: &Path, to: &Path) -> Result<bool, StoreError> {
    match fs::hard_link(from, to) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(StoreError::io(to, e)),
    }
}

/// The holder's thread: refresh the heartbeat every `timing.heartbeat`, and look every
/// second whether the lease is still ours.
fn heartbeat(path: &Path, me: Holder, timing: LeaseTiming, lost: &AtomicBool, done: &AtomicBool) {
    let tick = timing.heartbeat.min(Duration::from_secs(1));
    let mut me = me;
    let mut refreshed = std::time::Instant::now();
    while !done.load(Ordering::SeqCst) {
        std::thread::park_timeout(tick); // woken early by the lease's drop
        if done.load(Ordering::SeqCst) {
            break;
        }
        match holds(path, &me.token) {
            Some(true) => {}
            Some(false) => break,
            // A read that failed (a busy server): try again at the next tick.
            None => {
                if refreshed.elapsed() > timing.stale_after / 2 {
                    break;
                }
                continue;
            }
        }
        if refreshed.elapsed() < timing.heartbeat {
            continue;
        }
        me.heartbeat = rfc3339(SystemTime::now());
        // The slow half (writing and syncing the new holder) first, then one more look that
        // the lease is still ours right before the rename: a taker that wrote in between
        // would otherwise be overwritten, and neither side would know.
        let staged = stage_holder(path, &me);
        match (staged, holds(path, &me.token)) {
            (Ok(tmp), Some(true)) if fs::rename(&tmp, path).is_ok() => {
                refreshed = std::time::Instant::now();
                continue;
            }
            (Ok(tmp), Some(false)) => {
                let _ = fs::remove_file(&tmp);
                break;
            }
            (Ok(tmp), _) => {
                let _ = fs::remove_file(&tmp);
            }
            (Err(_), Some(false)) => break,
            (Err(_), _) => {}
        }
        if refreshed.elapsed() > timing.stale_after / 2 {
            // Unable to refresh: others will soon count us dead and take over; stop first.
            break;
        }
    }
    if !done.load(Ordering::SeqCst) {
        lost.store(true, Ordering::SeqCst);
    }
}

/// Whether the lease at `path` is still the one of `token`: `Some(false)` once a taker that
/// counted its holder dead replaced or removed it, `None` where it could not be read.
fn holds(path: &Path, token: &str) -> Option<bool> {
    match read_holder(path) {
        Ok(h) => Some(h.token == token),
        Err(_) if !path.exists() => Some(false),
        Err(_) => None,
    }
}

/// Writes `holder` to `path` through a temporary file of its own token (two holders, one
/// stalled, must not share a temporary name) and a rename.
fn write_holder(path: &Path, holder: &Holder) -> Result<(), StoreError> {
    let tmp = stage_holder(path, holder)?;
    fs::rename(&tmp, path).map_err(|e| StoreError::io(path, e))
}

/// [`write_holder`] up to the rename: the temporary file, written and synced.
fn stage_holder(path: &Path, holder: &Holder) -> Result<PathBuf, StoreError> {
    let text = serde_json::to_string_pretty(holder).map_err(|e| StoreError::corrupt(path, e))?;
    let tmp = path.with_file_name(format!("lease.{}.beat", holder.token));
    let mut file = fs::File::create(&tmp).map_err(|e| StoreError::io(&tmp, e))?;
    file.write_all(format!("{text}\n").as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|e| StoreError::io(&tmp, e))?;
    Ok(tmp)
}

fn read_holder(path: &Path) -> Result<Holder, StoreError> {
    read_json(path)
}

#[cfg(test)]
mod tests;
