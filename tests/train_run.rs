//! `attnres train` end to end on a tiny synthetic run: the run folder, determinism,
//! failure on NaN, bad input, export and score.

#[path = "common/run.rs"]
mod run;

use run::*;

/// `attnres train SPEC --out OUT --threads 2`, run to completion.
fn train(spec: &std::path::Path, out: &std::path::Path) -> std::process::Output {
    attnres()
        .arg("train")
        .arg(spec)
        .arg("--out")
        .arg(out)
        .args(["--threads", "2"])
        .output()
        .unwrap()
}

#[test]
fn a_run_writes_every_file_of_the_run_folder() {
    let tmp = TempDir::new("files");
    let spec = write(
        tmp.path(),
        "spec.yaml",
        &tiny_spec("{variant: block, block_size: 2}", 12, ""),
    );
    let out = tmp.path().join("run");
    let o = train(&spec, &out);
    assert!(o.status.success(), "{}", stderr(&o));
    for file in [
        "spec.json",
        "status.json",
        "steps.csv",
        "layers.parquet",
        "depth_attn.parquet",
        "summary.json",
    ] {
        assert!(out.join(file).is_file(), "missing {file}");
    }
    for file in ["model.bpk", "optim.bpk", "state.json"] {
        assert!(
            out.join("checkpoint").join(file).is_file(),
            "missing checkpoint/{file}"
        );
    }
    let status = std::fs::read_to_string(out.join("status.json")).unwrap();
    assert!(status.contains("\"done\""), "{status}");
    let rows = loss_columns(&out);
    assert_eq!(rows.len(), 12);
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["tokens"], 12 * 8 * 48);
    assert!(
        summary["acc_val"].as_f64().is_some(),
        "synthetic runs record answer accuracy"
    );
    let first: f64 = rows[0].split(' ').nth(1).unwrap().parse().unwrap();
    let last = summary["loss_train_last"].as_f64().unwrap();
    assert!(last < first, "loss did not fall: {first} -> {last}");

    // A second call trains nothing.
    let again = train(&spec, &out);
    assert!(String::from_utf8_lossy(&again.stdout).contains("done already"));

    // Export and score the finished run.
    let weights = tmp.path().join("model.safetensors");
    let o = attnres()
        .args(["export"])
        .arg(&out)
        .arg("--out")
        .arg(&weights)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(std::fs::metadata(&weights).unwrap().len() > 4 * 20_000);
    let text = write(tmp.path(), "probe.txt", "a=1;b=a;c=b;c?1 x=2;y=x;y?2");
    let o = attnres()
        .arg("score")
        .arg(&out)
        .arg(&text)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success() && stdout.contains("bits/byte"),
        "{stdout}{}",
        stderr(&o)
    );
}

#[test]
fn the_same_spec_gives_the_same_losses_bit_for_bit() {
    let tmp = TempDir::new("determinism");
    let spec = write(
        tmp.path(),
        "spec.yaml",
        &tiny_spec("{variant: full}", 8, "  micro_batches: 2\n"),
    );
    let mut runs = Vec::new();
    for name in ["a", "b"] {
        let out = tmp.path().join(name);
        let o = train(&spec, &out);
        assert!(o.status.success(), "{}", stderr(&o));
        runs.push(loss_columns(&out));
    }
    assert_eq!(runs[0], runs[1]);
}

#[test]
fn a_diverging_run_fails_with_its_step_and_reason() {
    let tmp = TempDir::new("nan");
    let spec = tiny_spec("baseline", 6, "")
        .replace("lr: 0.003", "lr: 1.0e30")
        .replace("warmup: 2", "warmup: 0");
    let spec = write(tmp.path(), "spec.yaml", &spec);
    let out = tmp.path().join("run");
    let o = train(&spec, &out);
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(
        err.contains("failed at step") && err.contains("loss became"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    let status = std::fs::read_to_string(out.join("status.json")).unwrap();
    assert!(
        status.contains("\"failed\"") && status.contains("reason"),
        "{status}"
    );
}

#[test]
fn a_missing_corpus_is_a_clear_error_before_training() {
    let tmp = TempDir::new("missing");
    let spec = tiny_spec("baseline", 4, "").replace(
        "{synthetic: {task: khop, hops: 2, n_vars: 5, train_examples: 2000, val_examples: 64}}",
        "{text: {paths: [/nonexistent/corpus/*.txt]}}",
    );
    let spec = write(tmp.path(), "spec.yaml", &spec);
    let out = tmp.path().join("run");
    let o = train(&spec, &out);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(
        err.contains("data.corpus.text.paths") && err.contains("/nonexistent/corpus/*.txt"),
        "{err}"
    );
    assert!(!out.join("steps.csv").exists());

    let bad = write(
        tmp.path(),
        "bad.yaml",
        &tiny_spec("baseline", 4, "  learning_rate: 0.1\n"),
    );
    let o = attnres().arg("train").arg(&bad).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(
        err.contains("bad.yaml") && err.contains("learning_rate"),
        "{err}"
    );
}
