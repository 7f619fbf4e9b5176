//! The checklist for adding a residual family (docs/architecture.md), enforced: every family
//! the sweep files accept is built by the tests' `all_variants()`, has its equations in
//! docs/method.md, and every parameter it owns is named in docs/weights.md.

mod common;

use std::collections::BTreeSet;

use attnres::model::Lm;
use attnres::model::config::Variant;
use attnres::model::params::named_params;
use common::*;

fn doc(name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("docs")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The variant names serde accepts, read from its "expected one of" message, so a family
/// added to the enum but not to `Variant::ALL` is caught too.
fn accepted_names() -> BTreeSet<String> {
    let err = serde_json::from_str::<Variant>("\"no_such_family\"").unwrap_err();
    let text = err.to_string();
    let list = text
        .split("expected one of ")
        .nth(1)
        .unwrap_or_else(|| panic!("unexpected serde message: {text}"));
    list.split(',')
        .filter_map(|s| s.split('`').nth(1).map(str::to_string))
        .collect()
}

#[test]
fn every_family_is_listed_tested_and_documented() {
    let listed: BTreeSet<String> = Variant::ALL.iter().map(|v| v.name().to_string()).collect();
    assert_eq!(listed, accepted_names(), "Variant::ALL and the enum differ");
    let tested: BTreeSet<String> = all_variants()
        .iter()
        .map(|r| r.variant().to_string())
        .collect();
    let method = doc("method.md");
    for name in &listed {
        assert!(
            tested.contains(name),
            "`{name}` is not in all_variants() (tests/common/mod.rs), so the identity, causality, count and training tests skip it"
        );
        assert!(
            method.contains(&format!("variant: {name}"))
                || method.contains(&format!("residual: {name}`")),
            "docs/method.md does not define `{name}` (no `variant: {name}` or `residual: {name}`)"
        );
    }
}

/// `residual.Mhc.layers.3.proj` -> `residual.Mhc.layers.{}.proj`.
fn pattern(path: &str) -> String {
    path.split('.')
        .map(|s| match s.parse::<usize>() {
            Ok(_) => "{}",
            Err(_) => s,
        })
        .collect::<Vec<_>>()
        .join(".")
}

/// Each row of docs/weights.md's table as (full names, shorthand suffixes): a row
/// `residual.X.layers.{l}.norm.gain`, `.proj` names `residual.X.layers.{}.norm.gain` and
/// any path under `residual.X.layers.{}.` ending in `.proj`.
fn documented() -> Vec<(String, Vec<String>)> {
    doc("weights.md")
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| {
            let cell = l.split('|').nth(1).unwrap_or_default();
            let names: Vec<String> = cell
                .split('`')
                .skip(1)
                .step_by(2)
                .map(|n| n.replace("{l}", "{}").replace("{i}", "{}"))
                .collect();
            let base = names.first().cloned().unwrap_or_default();
            (base, names[1..].to_vec())
        })
        .collect()
}

fn is_documented(path: &str, rows: &[(String, Vec<String>)]) -> bool {
    rows.iter().any(|(base, suffixes)| {
        let stem = match base.rfind("{}.") {
            Some(i) => &base[..i + 3],
            None => base.rsplit_once('.').map_or("", |(s, _)| s),
        };
        path == base || (path.starts_with(stem) && suffixes.iter().any(|s| path.ends_with(s)))
    })
}

#[test]
fn every_parameter_of_every_family_is_named_in_weights_md() {
    let device = test_device();
    let rows = documented();
    let mut missing = BTreeSet::new();
    let mut seen = 0;
    for config in all_models() {
        let model = Lm::init(&config, 0, &device).unwrap();
        for p in named_params(&model) {
            seen += 1;
            let path = pattern(&p.path);
            if !is_documented(&path, &rows) {
                missing.insert(format!("{path} ({})", config.arm_label()));
            }
        }
    }
    assert!(seen > 100, "only {seen} parameters visited");
    assert!(
        missing.is_empty(),
        "parameters not named in docs/weights.md: {missing:#?}"
    );
}
