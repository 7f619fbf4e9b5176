//! Property-based tests of the sweep loader: every shipped sweep, mutated at random (keys
//! dropped, list items duplicated, values retyped, numbers perturbed), loads without a panic
//! and either succeeds or fails with an error that names the file and a key or a line; so
//! does every shipped sweep file with its text edited (a byte-order mark, a second document,
//! a repeated line, a cut, a padded line).
//!
//! The normal test run tries `ATTNRES_FUZZ_CASES` cases (default 3,000); `make fuzz` runs
//! 100,000.

use std::path::{Path, PathBuf};

use attnres::spec::Sweep;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_yaml_ng::{Mapping, Value};

fn shipped_sweeps() -> Vec<(PathBuf, Value)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("sweeps");
    let mut out: Vec<(PathBuf, Value)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .map(|p| {
            let v = serde_yaml_ng::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
            (p, v)
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// One edit at a position chosen by `pick` among the document's nodes.
#[derive(Debug, Clone)]
enum Mutation {
    Drop,
    Duplicate,
    Retype(Value),
    Scale(f64),
    Negate,
    Zero,
    Huge,
}

fn replacement() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|i| Value::Number(i.into())),
        (-1e12f64..1e12).prop_map(|f| Value::Number(f.into())),
        "[a-z_]{0,12}".prop_map(Value::String),
        Just(Value::Sequence(vec![])),
        Just(Value::Mapping(Mapping::new())),
        Just(Value::String("block".into())),
        Just(Value::Number(0.into())),
    ]
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        2 => Just(Mutation::Drop),
        1 => Just(Mutation::Duplicate),
        3 => replacement().prop_map(Mutation::Retype),
        2 => (-3.0f64..3.0).prop_map(|e| Mutation::Scale(10f64.powf(e))),
        1 => Just(Mutation::Negate),
        1 => Just(Mutation::Zero),
        1 => Just(Mutation::Huge),
    ]
}

/// Number of nodes below (and including) `v`.
fn count(v: &Value) -> usize {
    1 + match v {
        Value::Sequence(s) => s.iter().map(count).sum(),
        Value::Mapping(m) => m.values().map(count).sum(),
        _ => 0,
    }
}

/// Applies `m` to the `target`-th node in pre-order (the root is node 0, which is only
/// retyped). Returns whether it was applied.
fn apply(v: &mut Value, target: &mut usize, m: &Mutation) -> bool {
    match v {
        Value::Sequence(items) => {
            for i in 0..items.len() {
                if *target == 1 {
                    match m {
                        Mutation::Drop => {
                            items.remove(i);
                            return true;
                        }
                        Mutation::Duplicate => {
                            let copy = items[i].clone();
                            items.insert(i, copy);
                            return true;
                        }
                        _ => return edit(&mut items[i], m),
                    }
                }
                *target -= 1;
                if apply(&mut items[i], target, m) {
                    return true;
                }
            }
            false
        }
        Value::Mapping(map) => {
            let keys: Vec<Value> = map.keys().cloned().collect();
            for k in keys {
                if *target == 1 {
                    return match m {
                        Mutation::Drop => map.remove(&k).is_some(),
                        // A mapping cannot hold a key twice; duplicate it under a near name.
                        Mutation::Duplicate => {
                            let copy = map[&k].clone();
                            let name = format!("{}_", k.as_str().unwrap_or("key"));
                            map.insert(Value::String(name), copy);
                            true
                        }
                        _ => edit(map.get_mut(&k).unwrap(), m),
                    };
                }
                *target -= 1;
                if apply(map.get_mut(&k).unwrap(), target, m) {
                    return true;
                }
            }
            false
        }
        _ => false,
    }
}

fn edit(v: &mut Value, m: &Mutation) -> bool {
    let number = v.as_f64();
    *v = match (m, number) {
        (Mutation::Retype(r), _) => r.clone(),
        (Mutation::Scale(f), Some(x)) => num(x * f, v.is_u64() || v.is_i64()),
        (Mutation::Negate, Some(x)) => num(-x, v.is_u64() || v.is_i64()),
        (Mutation::Zero, Some(_)) => Value::Number(0.into()),
        (Mutation::Huge, Some(_)) => Value::Number(u64::MAX.into()),
        (Mutation::Huge, None) => Value::Number(1_000_000_000_000u64.into()),
        _ => Value::Null,
    };
    true
}

fn num(x: f64, integer: bool) -> Value {
    if integer && x.is_finite() && x.abs() < 9e15 {
        Value::Number((x.round() as i64).into())
    } else {
        Value::Number(x.into())
    }
}

fn cases() -> u32 {
    std::env::var("ATTNRES_FUZZ_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3000)
}

#[test]
fn mutated_sweeps_load_or_fail_with_a_located_error() {
    let sweeps = shipped_sweeps();
    assert!(sweeps.len() >= 5, "only {} shipped sweeps", sweeps.len());
    let mut runner = TestRunner::new(Config {
        cases: cases(),
        failure_persistence: None,
        ..Config::default()
    });
    let strategy = (
        0..sweeps.len(),
        proptest::collection::vec((any::<prop::sample::Index>(), mutation()), 1..4),
    );
    let (loaded, refused) = (std::cell::Cell::new(0u32), std::cell::Cell::new(0u32));
    runner
        .run(&strategy, |(which, edits)| {
            let (path, original) = &sweeps[which];
            let mut doc = original.clone();
            for (at, m) in &edits {
                let mut target = at.index(count(&doc).max(1));
                if target == 0 {
                    target = 1;
                }
                apply(&mut doc, &mut target, m);
            }
            let text = serde_yaml_ng::to_string(&doc).unwrap();
            match Sweep::parse(path, &text) {
                Ok(_) => loaded.set(loaded.get() + 1),
                Err(e) => {
                    refused.set(refused.get() + 1);
                    let shown = e.to_string();
                    prop_assert!(
                        shown.starts_with(&path.display().to_string()),
                        "error does not name the file: {shown}\n{text}"
                    );
                    prop_assert!(
                        e.location.is_some() || !e.key.is_empty(),
                        "error names neither a key nor a line: {shown}\n{text}"
                    );
                    prop_assert!(!e.message.trim().is_empty(), "empty message\n{text}");
                }
            }
            Ok(())
        })
        .unwrap();
    // Both outcomes must occur, or the mutations are not reaching the validator.
    let (loaded, refused) = (loaded.get(), refused.get());
    assert!(
        loaded > 0 && refused > 0,
        "loaded {loaded}, refused {refused}"
    );
    eprintln!("{} cases: {loaded} loaded, {refused} refused", cases());
}

/// An edit of a sweep file's text, as files go wrong outside any YAML library.
#[derive(Debug, Clone)]
enum TextEdit {
    /// A UTF-8 byte-order mark in front: read as if it were not there.
    Bom,
    /// A second YAML document after `---`.
    SecondDocument,
    /// Line `i` (mod the line count) written twice: often a key given twice.
    RepeatLine(usize),
    /// Cut after byte `i` (mod the length, on a character boundary).
    Truncate(usize),
    /// Line `i` doubled in size by `padding` spaces and a comment.
    Pad(usize, usize),
}

fn text_edit() -> impl Strategy<Value = TextEdit> {
    prop_oneof![
        Just(TextEdit::Bom),
        Just(TextEdit::SecondDocument),
        any::<usize>().prop_map(TextEdit::RepeatLine),
        any::<usize>().prop_map(TextEdit::Truncate),
        (any::<usize>(), 0..4096usize).prop_map(|(i, n)| TextEdit::Pad(i, n)),
    ]
}

fn edit_text(text: &str, edit: &TextEdit) -> Vec<u8> {
    let lines: Vec<&str> = text.lines().collect();
    match edit {
        TextEdit::Bom => [&[0xEF, 0xBB, 0xBF][..], text.as_bytes()].concat(),
        TextEdit::SecondDocument => format!("{text}---\nname: other\n").into_bytes(),
        TextEdit::RepeatLine(i) => {
            let i = i % lines.len();
            let mut out = lines.clone();
            out.insert(i, lines[i]);
            (out.join("\n") + "\n").into_bytes()
        }
        TextEdit::Truncate(i) => {
            let mut cut = i % text.len();
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            text.as_bytes()[..cut].to_vec()
        }
        TextEdit::Pad(i, n) => {
            let i = i % lines.len();
            let mut out: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
            out[i] = format!("{}{} # padding", out[i], " ".repeat(*n));
            (out.join("\n") + "\n").into_bytes()
        }
    }
}

/// Every shipped sweep with its text edited loads or fails naming the file and a key or
/// a line; a byte-order mark changes nothing.
#[test]
fn edited_sweep_files_load_or_fail_with_a_located_error() {
    let sweeps = shipped_sweeps();
    let dir = std::env::temp_dir().join(format!("attnres-fuzz-text-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut runner = TestRunner::new(Config {
        cases: cases() / 10,
        failure_persistence: None,
        ..Config::default()
    });
    let strategy = (0..sweeps.len(), text_edit());
    runner
        .run(&strategy, |(which, edit)| {
            let original = std::fs::read_to_string(&sweeps[which].0).unwrap();
            let path = dir.join("sweep.yaml");
            std::fs::write(&path, edit_text(&original, &edit)).unwrap();
            let plain = Sweep::parse(&path, &original).map(|s| s.runs.len());
            match Sweep::load(&path) {
                Ok(s) => {
                    if let TextEdit::Bom = edit {
                        prop_assert_eq!(plain.ok(), Some(s.runs.len()));
                    }
                }
                Err(e) => {
                    prop_assert!(!matches!(edit, TextEdit::Bom), "BOM refused: {e}");
                    let shown = e.to_string();
                    prop_assert!(
                        shown.starts_with(&path.display().to_string()),
                        "error does not name the file: {shown}"
                    );
                    prop_assert!(
                        e.location.is_some() || !e.key.is_empty(),
                        "{edit:?}: error names neither a key nor a line: {shown}"
                    );
                }
            }
            Ok(())
        })
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}
