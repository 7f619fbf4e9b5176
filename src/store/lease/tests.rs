//! Tests of the run lease: one holder per run, takeover only from the dead, a race with one
//! winner, and a stalled holder that notices its loss.

use rand::Rng;

use super::holder::hostname;
use super::*;

fn run_dir(name: &str) -> (tempfile::TempDir, RunDir) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = RunDir::new(tmp.path().join(name));
    (tmp, dir)
}

fn someone(host: &str, pid: u32, job: Option<&str>, silent: Duration) -> Holder {
    let at = rfc3339(SystemTime::now() - silent);
    Holder {
        host: host.into(),
        pid,
        job: job.map(String::from),
        attempt: 0,
        token: format!("{:016x}", rand::rng().random::<u64>()),
        acquired: at.clone(),
        heartbeat: at,
    }
}

fn held(claim: Claim) -> Lease {
    match claim {
        Claim::Held(lease) => lease,
        Claim::Busy(h) => panic!("busy: {}", h.describe()),
    }
}

fn busy(claim: Claim) -> Holder {
    match claim {
        Claim::Busy(h) => h,
        Claim::Held(_) => panic!("held, but should have been busy"),
    }
}

const FAST: LeaseTiming = LeaseTiming {
    heartbeat: Duration::from_millis(50),
    stale_after: Duration::from_secs(2),
};

#[test]
fn one_claim_holds_a_run_until_it_drops() {
    let (_tmp, dir) = run_dir("r");
    let me = Holder::me();
    let slow = LeaseTiming::default(); // no heartbeat file appears while we look
    let first = held(Lease::try_acquire_as(&dir, me.clone(), slow).unwrap());
    // Another claim of this very process (another job thread) is refused.
    let other = busy(Lease::try_acquire_as(&dir, Holder::me(), slow).unwrap());
    assert_eq!(other.token, me.token);
    assert_eq!(Lease::holder(&dir).map(|h| h.token), Some(me.token));
    drop(first);
    assert!(!lease_path(&dir).exists(), "a dropped lease is removed");
    assert!(Lease::holder(&dir).is_none());
    let _again = held(Lease::try_acquire_as(&dir, Holder::me(), slow).unwrap());
    let left: Vec<_> = fs::read_dir(&dir.root).unwrap().collect();
    assert_eq!(left.len(), 1, "only lease.json is left: {left:?}");
}

#[test]
fn a_live_foreign_holder_keeps_its_lease_and_a_silent_one_loses_it() {
    let (_tmp, dir) = run_dir("r");
    dir.create().unwrap();
    let path = lease_path(&dir);
    let alive = someone("node-b", 1, None, Duration::from_secs(1));
    write_holder(&path, &alive).unwrap();
    let kept = busy(Lease::try_acquire_as(&dir, Holder::me(), FAST).unwrap());
    assert_eq!(kept, alive);
    assert!(kept.describe().starts_with("host node-b pid 1, heartbeat "));
    let silent = someone("node-b", 1, None, Duration::from_secs(3));
    write_holder(&path, &silent).unwrap();
    let me = Holder::me();
    let lease = held(Lease::try_acquire_as(&dir, me.clone(), FAST).unwrap());
    assert_eq!(read_holder(&path).unwrap().token, me.token);
    drop(lease);
}

#[test]
fn a_dead_process_of_this_host_or_an_earlier_attempt_of_this_task_is_taken_over_at_once() {
    let (_tmp, dir) = run_dir("r");
    dir.create().unwrap();
    let path = lease_path(&dir);
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let dead_pid = child.id();
    child.wait().unwrap();
    let dead = someone(&hostname(), dead_pid, None, Duration::ZERO);
    write_holder(&path, &dead).unwrap();
    drop(held(
        Lease::try_acquire_as(&dir, Holder::me(), FAST).unwrap(),
    ));

    // A holder on another host with a fresh heartbeat: attempt 0 of task 16_3.
    let earlier = someone("node-c", 77, Some("16_3"), Duration::ZERO);
    write_holder(&path, &earlier).unwrap();
    let mut me = Holder::me();
    me.job = Some("16_4".into());
    me.attempt = 1;
    busy(Lease::try_acquire_as(&dir, me.clone(), FAST).unwrap());
    // The same attempt of the same task (two processes in one allocation): both alive.
    me.job = Some("16_3".into());
    me.attempt = 0;
    busy(Lease::try_acquire_as(&dir, me.clone(), FAST).unwrap());
    // Its requeued attempt takes over at once.
    me.attempt = 1;
    drop(held(Lease::try_acquire_as(&dir, me, FAST).unwrap()));
}

#[test]
fn claimants_racing_for_one_stale_lease_get_it_once() {
    for round in 0..40 {
        let (_tmp, dir) = run_dir("r");
        dir.create().unwrap();
        if round % 2 == 0 {
            let stale = someone("node-d", 9, None, Duration::from_secs(60));
            write_holder(&lease_path(&dir), &stale).unwrap();
        }
        let barrier = std::sync::Barrier::new(8);
        let leases: Vec<Option<Lease>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|_| {
                    s.spawn(|| {
                        let me = Holder::me();
                        barrier.wait();
                        match Lease::try_acquire_as(&dir, me, FAST).unwrap() {
                            Claim::Held(l) => Some(l),
                            Claim::Busy(_) => None,
                        }
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let winners: Vec<&Lease> = leases.iter().flatten().collect();
        assert_eq!(winners.len(), 1, "round {round}: {} holders", winners.len());
        assert_eq!(
            read_holder(&lease_path(&dir)).unwrap().token,
            winners[0].token
        );
    }
}

#[test]
fn the_heartbeat_moves_and_a_lease_taken_from_a_stalled_holder_is_lost() {
    let (_tmp, dir) = run_dir("r");
    let me = Holder::me();
    let lease = held(Lease::try_acquire_as(&dir, me.clone(), FAST).unwrap());
    let path = lease_path(&dir);
    std::thread::sleep(Duration::from_millis(300));
    let now = read_holder(&path).unwrap();
    assert_eq!(now.token, me.token);
    assert_ne!(now.heartbeat, me.heartbeat, "the heartbeat was refreshed");
    assert!(!lease.lost_flag().load(Ordering::SeqCst));
    // As if we had stalled past stale_after and another node had taken the run over.
    let taker = someone("node-e", 5, None, Duration::ZERO);
    write_holder(&path, &taker).unwrap();
    let lost = lease.lost_flag();
    let t0 = std::time::Instant::now();
    while !lost.load(Ordering::SeqCst) && t0.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(lost.load(Ordering::SeqCst), "the loss was noticed");
    drop(lease);
    assert_eq!(
        read_holder(&path).unwrap(),
        taker,
        "the taker's lease is left alone"
    );
}
