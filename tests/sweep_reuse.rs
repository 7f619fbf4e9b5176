//! A sweep that extends another (more seeds, more arms) copies the runs the other has
//! finished, byte for byte, and trains only the rest; `grid.exclude` lists drop the runs
//! that need no more seeds.

#[path = "common/run.rs"]
mod run;

use std::path::Path;

use run::*;

const SETTING: &str = "data: {corpus: {synthetic: {task: khop, hops: 2, n_vars: 5, train_examples: 2000, val_examples: 64}}}
model: {context: 48, head_dim: 16}
sizes: [nano]
train: {batch_size: 8, lr: 0.003, budget: {tokens: 3000}, eval_every: 4, eval_batches: 2, checkpoint_every: 4}
";

fn run_ids(dir: &Path) -> Vec<String> {
    let mut ids: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let path = e.unwrap().path();
            path.join("summary.json")
                .is_file()
                .then(|| path.file_name().unwrap().to_string_lossy().into_owned())
        })
        .collect();
    ids.sort();
    ids
}

/// `attnres run SWEEP --results RESULTS` on one thread, which must succeed.
fn train(sweep: &Path, results: &Path) -> std::process::Output {
    let o = attnres()
        .arg("run")
        .arg(sweep)
        .args(["--threads", "1", "--results"])
        .arg(results)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    o
}

#[test]
fn a_sweep_copies_the_runs_another_sweep_finished() {
    let tmp = TempDir::new("sweep-reuse");
    let results = tmp.path().join("results");
    let first = write(
        tmp.path(),
        "first.yaml",
        &format!("name: first\nresidual: [baseline, full]\nseeds: [0]\n{SETTING}"),
    );
    train(&first, &results);
    let first_ids = run_ids(&results.join("first"));
    assert_eq!(first_ids.len(), 2);

    // The same setting, one arm more, two seeds, and the baseline kept at one seed.
    let second = write(
        tmp.path(),
        "second.yaml",
        &format!(
            "name: second\nresidual: [baseline, full, {{variant: block, block_size: 2}}]\n\
             seeds: [0, 1]\ngrid: {{exclude: [{{variant: [baseline], seed: [1]}}]}}\n{SETTING}"
        ),
    );
    let o = train(&second, &results);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        out.contains(&format!(
            "copied 2 finished runs from {}; they are not retrained",
            results.join("first").display()
        )),
        "{out}"
    );
    assert!(out.contains("3 trained, 2 done already"), "{out}");
    let second_ids = run_ids(&results.join("second"));
    assert_eq!(second_ids.len(), 5, "baseline s0, full s0-1, block s0-1");
    for id in &first_ids {
        assert!(second_ids.contains(id), "{id} not in the second sweep");
        // The final weights come along: `export` loads them from the copy.
        let out = tmp.path().join(format!("{id}.safetensors"));
        let o = attnres()
            .arg("export")
            .arg(results.join("second").join(id))
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap();
        assert!(o.status.success() && out.is_file(), "{}", stderr(&o));
        for file in ["summary.json", "steps.csv", "layers.parquet", "status.json"] {
            let a = std::fs::read(results.join("first").join(id).join(file)).unwrap();
            let b = std::fs::read(results.join("second").join(id).join(file)).unwrap();
            assert_eq!(a, b, "{id}/{file} differs from the run it was copied from");
        }
    }
    let stray: Vec<_> = std::fs::read_dir(results.join("second"))
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            name.ends_with(".tmp").then_some(name)
        })
        .collect();
    assert!(stray.is_empty(), "temporaries left: {stray:?}");

    // A refused run (no GPU here) copies nothing: bad input writes nothing.
    let third = write(
        tmp.path(),
        "third.yaml",
        &format!("name: third\nresidual: [baseline, full]\nseeds: [0]\n{SETTING}"),
    );
    let o = attnres()
        .arg("run")
        .arg(&third)
        .args(["--device", "cuda", "--results"])
        .arg(&results)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        !results.join("third").exists(),
        "a refused run wrote its sweep folder"
    );
}
