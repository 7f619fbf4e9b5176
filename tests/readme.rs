//! The README cannot drift from the tool: every command in its `sh` blocks runs here, in a
//! scratch folder laid out like a clone (sweeps/, the reference results), with the sweep
//! files it tells the reader to save. `attnres ...` runs this build's binary and must exit 0;
//! `make TARGET` must be a target the Makefile can plan (`make -n`), since those targets
//! build, set up or test the whole project; `tensorboard ...` must find the runs' curves.

#[path = "common/run.rs"]
mod run;

use std::path::Path;

use run::*;

/// A fenced block of the README: its language and its lines, with the line of text
/// (outside any block) that came last before it.
struct Block {
    lang: String,
    lines: Vec<String>,
    intro: String,
}

fn blocks(readme: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut current: Option<Block> = None;
    let mut last_text = String::new();
    for line in readme.lines() {
        if let Some(fence) = line.strip_prefix("```") {
            match current.take() {
                Some(block) => out.push(block),
                None => {
                    current = Some(Block {
                        lang: fence.trim().to_string(),
                        lines: Vec::new(),
                        intro: last_text.clone(),
                    })
                }
            }
        } else if let Some(block) = current.as_mut() {
            block.lines.push(line.to_string());
        } else if !line.trim().is_empty() {
            last_text = line.to_string();
        }
    }
    assert!(current.is_none(), "README.md: a code block is never closed");
    out
}

/// The file a YAML block is to be saved as: "Save this as `NAME`" just before it.
fn saved_as(intro: &str) -> Option<String> {
    let rest = intro.split("Save this as `").nth(1)?;
    Some(rest.split('`').next()?.to_string())
}

/// A command line without its trailing `# comment`.
fn command(line: &str) -> Option<Vec<String>> {
    let code = match line.find(" #") {
        Some(at) => &line[..at],
        None => line,
    };
    let words: Vec<String> = code.split_whitespace().map(str::to_string).collect();
    (!words.is_empty()).then_some(words)
}

/// Runs an `attnres` line of the README in `dir`; it must succeed.
fn run_attnres_line(dir: &Path, words: &[String]) {
    let out = attnres()
        .current_dir(dir)
        .args(&words[1..])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "README.md: `{}` failed ({}):\n{}\n{}",
        words.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stdout),
        stderr(&out)
    );
}

/// A `make TARGET` line of the README: one target the Makefile can plan (`make -n`).
fn plan_make_line(root: &Path, line: &str, words: &[String]) {
    assert_eq!(words.len(), 2, "README.md: `{line}`: one target a line");
    let out = std::process::Command::new("make")
        .current_dir(root)
        .args(["-n", &words[1]])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "README.md: `{line}`: make has no such target: {}",
        stderr(&out)
    );
}

/// A `tensorboard` line of the README, run by TensorBoard itself from the venv `make setup`
/// fills, in its `--inspect` mode: it must find the runs' loss curves.
fn inspect_tensorboard_line(dir: &Path, line: &str, words: &[String]) {
    let tensorboard = tensorboard_venv().join("bin/tensorboard");
    let out = std::process::Command::new(tensorboard)
        .current_dir(dir)
        .arg("--inspect")
        .args(&words[1..])
        .output()
        .expect("tensorboard is missing: run `make setup`");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("loss/train"),
        "README.md: `{line}` found no loss curves:\n{text}{}",
        stderr(&out)
    );
}

#[test]
fn every_readme_command_runs() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let scratch = TempDir::new("readme");
    let dir = scratch.path();
    std::os::unix::fs::symlink(root.join("sweeps"), dir.join("sweeps")).unwrap();
    std::fs::create_dir_all(dir.join("results")).unwrap();
    // `report --results results/reference` reads these and writes reports/reference/ in
    // the scratch folder, never in the repository.
    std::os::unix::fs::symlink(
        root.join("results/reference"),
        dir.join("results/reference"),
    )
    .unwrap();

    let (mut attnres_lines, mut make_lines) = (0, 0);
    for block in blocks(&readme) {
        match block.lang.as_str() {
            "yaml" => {
                let name = saved_as(&block.intro).unwrap_or_else(|| {
                    panic!(
                        "README.md: a yaml block must follow \"Save this as `NAME`\", got {:?}",
                        block.intro
                    )
                });
                std::fs::write(dir.join(name), block.lines.join("\n") + "\n").unwrap();
            }
            "sh" => {
                for line in &block.lines {
                    let Some(words) = command(line) else { continue };
                    match words[0].as_str() {
                        "attnres" => {
                            attnres_lines += 1;
                            run_attnres_line(dir, &words);
                        }
                        "make" => {
                            make_lines += 1;
                            plan_make_line(root, line, &words);
                        }
                        "tensorboard" => {
                            inspect_tensorboard_line(dir, line, &words);
                        }
                        other => panic!(
                            "README.md: `{line}`: this test runs `attnres`, `make` and `tensorboard` lines only, not `{other}`"
                        ),
                    }
                }
            }
            other => panic!("README.md: a ```{other} block: this test knows sh and yaml only"),
        }
    }
    assert!(
        attnres_lines >= 5 && make_lines >= 2,
        "README.md: {attnres_lines} attnres and {make_lines} make lines found; is the parser blind?"
    );
    // What the walk-through says it writes is there.
    for made in [
        "results/my-sweep/sweep.yaml",
        "reports/my-sweep/report.md",
        "reports/my-sweep/report.html",
    ] {
        assert!(dir.join(made).is_file(), "README.md promises {made}");
    }
}

#[test]
fn readme_stays_short_and_names_the_binary_where_make_puts_it() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(lines <= 200, "README.md has {lines} lines; keep it to 200");
    let makefile = std::fs::read_to_string(root.join("Makefile")).unwrap();
    assert!(makefile.contains("CACHE            ?= $(HOME)/.cache/attnres"));
    assert!(makefile.contains("CARGO_TARGET_DIR ?= $(CACHE)/target"));
    assert!(readme.contains("`~/.cache/attnres/target/release/attnres`"));
    // Every relative link points at a file of the repository.
    for part in readme.split("](").skip(1) {
        let target = part.split(')').next().unwrap();
        if target.starts_with("http") {
            continue;
        }
        let file = target.split('#').next().unwrap();
        assert!(
            root.join(file).exists(),
            "README.md links {target}, which is not in the repository"
        );
    }
}
