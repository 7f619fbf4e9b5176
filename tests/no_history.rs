//! What a user reads describes the tool as it is: README.md, docs/, the sweep files and the
//! reference reports (which `tests/reference_reports.rs` holds to what `attnres report`
//! writes now) tell no development history. History lives in git log.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Every file under `dir` with one of `exts`, recursively.
fn files_under(dir: &Path, exts: &[&str], out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files_under(&path, exts, out);
        } else if exts
            .iter()
            .any(|e| path.extension().and_then(|x| x.to_str()) == Some(e))
        {
            out.push(path);
        }
    }
}

/// "session 12", "sessions 11 and 12", "issue 13", "issue #13", "earlier version": the
/// phrases of a diary, case-insensitive.
fn diary_phrases(line: &str) -> Vec<String> {
    let lower = line.to_lowercase();
    let mut found = Vec::new();
    for word in ["session ", "sessions ", "issue ", "issues "] {
        for (at, _) in lower.match_indices(word) {
            let starts_word = at == 0 || !lower.as_bytes()[at - 1].is_ascii_alphanumeric();
            let rest = lower[at + word.len()..].trim_start_matches('#');
            if starts_word && rest.starts_with(|c: char| c.is_ascii_digit()) {
                found.push(line[at..(at + word.len() + 4).min(line.len())].to_string());
            }
        }
    }
    if lower.contains("earlier version") {
        found.push("earlier version".into());
    }
    found
}

/// Words of 7 to 40 hex digits with a digit and a letter: the candidates for a commit hash.
fn hex_words(line: &str) -> Vec<String> {
    line.split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| (7..=40).contains(&w.len()) && w.chars().all(|c| c.is_ascii_hexdigit()))
        .filter(|w| {
            w.chars().any(|c| c.is_ascii_digit()) && w.chars().any(|c| c.is_ascii_alphabetic())
        })
        .map(str::to_lowercase)
        .collect()
}

/// Which of `words` name a commit of this repository (`git cat-file --batch-check`).
fn commits_among(root: &Path, words: &[String]) -> Vec<String> {
    use std::io::Write;
    let mut git = Command::new("git")
        .current_dir(root)
        .args(["cat-file", "--batch-check=%(objecttype)"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("git is needed to tell commit hashes from other hex words");
    let mut stdin = git.stdin.take().unwrap();
    for w in words {
        writeln!(stdin, "{w}").unwrap();
    }
    drop(stdin);
    let out = git.wait_with_output().unwrap();
    assert!(out.status.success(), "git cat-file failed");
    let types = String::from_utf8(out.stdout).unwrap();
    words
        .iter()
        .zip(types.lines())
        .filter(|(_, t)| *t == "commit")
        .map(|(w, _)| w.clone())
        .collect()
}

#[test]
fn user_facing_text_tells_no_history() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![root.join("README.md")];
    files_under(&root.join("docs"), &["md", "yaml"], &mut files);
    files_under(&root.join("sweeps"), &["yaml"], &mut files);
    files_under(&root.join("reports/reference"), &["md", "html"], &mut files);
    assert!(files.len() > 20, "only {} files found", files.len());
    let mut problems = Vec::new();
    let mut hex: Vec<(String, String)> = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let name = file.strip_prefix(root).unwrap().display().to_string();
        for (i, line) in text.lines().enumerate() {
            // A report's provenance line names the builds that trained its runs: data, not prose.
            if line.starts_with("Generated ") || line.starts_with("<p>Generated ") {
                continue;
            }
            for phrase in diary_phrases(line) {
                problems.push(format!("{name}:{}: \"{phrase}\"", i + 1));
            }
            for w in hex_words(line) {
                hex.push((format!("{name}:{}", i + 1), w));
            }
        }
    }
    let words: Vec<String> = hex.iter().map(|(_, w)| w.clone()).collect();
    let commits = commits_among(root, &words);
    for (place, w) in &hex {
        if commits.contains(w) {
            problems.push(format!("{place}: commit {w}"));
        }
    }
    assert!(
        problems.is_empty(),
        "development history in user-facing text (move it to git log):\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_history_detector_can_fail() {
    assert_eq!(diary_phrases("measured in Session 31, twice").len(), 1);
    assert_eq!(diary_phrases("see issue #13").len(), 1);
    assert_eq!(diary_phrases("An earlier version said so").len(), 1);
    assert!(diary_phrases("one session at a time; 13 issues").is_empty());
    assert_eq!(
        hex_words("built at 0a1d179, run f1ca4230a6"),
        ["0a1d179", "f1ca4230a6"]
    );
    assert!(hex_words("deadbeef and 1234567").is_empty());
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let head = Command::new("git")
        .current_dir(root)
        .args(["rev-parse", "HEAD"])
        .output()
        .unwrap();
    let head = String::from_utf8(head.stdout).unwrap().trim().to_string();
    assert_eq!(
        commits_among(root, &[head.clone(), "f1ca4230a6".into()]),
        [head]
    );
}
