//! docs/cli.md is the `--help` of every command, as this build prints it: a changed option
//! that is not followed by `ATTNRES_UPDATE_DOCS=1 cargo test --test cli_docs` fails here.

#[path = "common/run.rs"]
mod run;

use std::path::Path;

use run::*;

/// `attnres ARGS --help`, as printed.
fn help(args: &[&str]) -> String {
    let out = attnres().args(args).arg("--help").output().unwrap();
    assert!(
        out.status.success(),
        "attnres {args:?} --help: {}",
        stderr(&out)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The subcommands a help text lists under "Commands:", without `help`.
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| l.trim() != "Commands:")
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_string)
        .collect()
}

/// The page: the top-level help, then each command's (and each nested command's).
fn page() -> String {
    let mut out = String::from(
        "# Command-line reference\n\n\
         Every command's `--help`, as this version prints it. A test regenerates this page\n\
         and fails when it is stale. The README shows the commands in use.\n\n",
    );
    let top = help(&[]);
    out.push_str(&format!("```text\n$ attnres --help\n{top}```\n"));
    let mut queue: Vec<Vec<String>> = subcommands(&top).into_iter().map(|c| vec![c]).collect();
    while !queue.is_empty() {
        let path = queue.remove(0);
        let args: Vec<&str> = path.iter().map(String::as_str).collect();
        let text = help(&args);
        out.push_str(&format!(
            "\n## attnres {}\n\n```text\n$ attnres {} --help\n{text}```\n",
            path.join(" "),
            path.join(" ")
        ));
        for (i, sub) in subcommands(&text).into_iter().enumerate() {
            let mut nested = path.clone();
            nested.push(sub);
            queue.insert(i, nested);
        }
    }
    out
}

#[test]
fn docs_cli_is_the_current_help() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/cli.md");
    let page = page();
    assert!(page.contains("## attnres run\n") && page.contains("## attnres data fetch\n"));
    if std::env::var_os("ATTNRES_UPDATE_DOCS").is_some() {
        std::fs::write(&path, &page).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == page,
        "docs/cli.md is stale; run ATTNRES_UPDATE_DOCS=1 cargo test --test cli_docs and commit it"
    );
}
