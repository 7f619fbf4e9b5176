//! A committed reference run, trained again from its spec.json with the threads it
//! recorded, gives the same losses bit for bit: the probes (including `block_out_rms`,
//! added after the reference runs were trained) never perturb training, and the committed
//! numbers can be reproduced by anyone with the corpus.

#[path = "common/run.rs"]
mod run;

use std::path::Path;

use attnres::store::metrics::read_layers;
use run::*;

/// steps.csv without its timing columns (wall_s, tokens_per_s).
fn losses(run: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(run.join("steps.csv")).unwrap();
    let header: Vec<&str> = text.lines().next().unwrap().split(',').collect();
    let keep: Vec<usize> = (0..header.len())
        .filter(|&i| !matches!(header[i], "wall_s" | "tokens_per_s"))
        .collect();
    text.lines()
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            keep.iter().map(|&i| f[i]).collect::<Vec<_>>().join(",")
        })
        .collect()
}

#[test]
fn a_reference_run_retrains_to_the_same_losses_bit_for_bit() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // The quickest committed run: quick sweep, block S=2 at the smallest size (~8 s).
    let reference = root.join("results/reference/quick/15f9d8f773");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(reference.join("summary.json")).unwrap())
            .unwrap();
    let threads = summary["threads"].as_u64().unwrap().to_string();
    let tmp = TempDir::new("reproduce");
    let out = tmp.path().join("run");
    let o = attnres()
        .arg("train")
        .arg(reference.join("spec.json"))
        .arg("--out")
        .arg(&out)
        .args(["--backend", "tch", "--threads", &threads])
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "retraining needs the corpus (`make data`): {}",
        stderr(&o)
    );
    let (want, got) = (losses(&reference), losses(&out));
    assert_eq!(want.len(), got.len(), "number of logged steps");
    for (w, g) in want.iter().zip(&got) {
        assert_eq!(w, g, "a retrained step differs from the committed one");
    }
    // The new probe is there: one value per Transformer block at every eval.
    let rows = read_layers(&out.join("layers.parquet"), None).unwrap();
    let blocks = summary_blocks(&reference);
    let last = rows.iter().map(|r| r.step).max().unwrap();
    let block_rows: Vec<_> = rows
        .iter()
        .filter(|r| r.step == last && r.metric == "block_out_rms")
        .collect();
    assert_eq!(block_rows.len(), blocks, "{block_rows:?}");
    assert!(
        block_rows
            .iter()
            .all(|r| r.value.is_finite() && r.value > 0.0)
    );
}

fn summary_blocks(run: &Path) -> usize {
    let spec: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("spec.json")).unwrap()).unwrap();
    spec["model"]["n_blocks"].as_u64().unwrap() as usize
}
