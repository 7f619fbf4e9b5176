//! A small document model, rendered both as Markdown and as self-contained HTML.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use base64::Engine;

#[derive(Debug, Clone)]
pub enum Block {
    Heading(u8, String),
    Para(String),
    Table {
        header: Vec<String>,
        rows: Vec<Vec<String>>,
    },
    /// A figure file (PNG; an SVG sits beside it) and its caption.
    Figure {
        png: PathBuf,
        caption: String,
    },
    Code(String),
    /// A bulleted list of short paragraphs.
    List(Vec<String>),
}

#[derive(Debug, Clone, Default)]
pub struct Doc {
    pub title: String,
    pub blocks: Vec<Block>,
}

impl Doc {
    pub fn h(&mut self, level: u8, text: impl Into<String>) {
        self.blocks.push(Block::Heading(level, text.into()));
    }
    pub fn p(&mut self, text: impl Into<String>) {
        self.blocks.push(Block::Para(text.into()));
    }
    pub fn table(&mut self, header: &[&str], rows: Vec<Vec<String>>) {
        self.blocks.push(Block::Table {
            header: header.iter().map(|s| s.to_string()).collect(),
            rows,
        });
    }
    pub fn figure(&mut self, png: PathBuf, caption: impl Into<String>) {
        self.blocks.push(Block::Figure {
            png,
            caption: caption.into(),
        });
    }
    pub fn list(&mut self, items: Vec<String>) {
        self.blocks.push(Block::List(items));
    }

    pub fn code(&mut self, text: impl Into<String>) {
        self.blocks.push(Block::Code(text.into()));
    }

    pub fn figures(&self) -> usize {
        self.blocks
            .iter()
            .filter(|b| matches!(b, Block::Figure { .. }))
            .count()
    }

    /// Markdown, with figures linked relative to `dir` (the report folder).
    pub fn markdown(&self, dir: &Path) -> String {
        let mut out = format!("# {}\n\n", self.title);
        for b in &self.blocks {
            match b {
                Block::Heading(l, t) => {
                    let _ = writeln!(out, "{} {t}\n", "#".repeat(*l as usize));
                }
                Block::Para(t) => {
                    let _ = writeln!(out, "{t}\n");
                }
                Block::Table { header, rows } => {
                    let _ = writeln!(out, "| {} |", header.join(" | "));
                    let _ = writeln!(
                        out,
                        "|{}|",
                        header.iter().map(|_| "---").collect::<Vec<_>>().join("|")
                    );
                    for r in rows {
                        let _ = writeln!(out, "| {} |", r.join(" | "));
                    }
                    out.push('\n');
                }
                Block::Figure { png, caption } => {
                    let rel = png.strip_prefix(dir).unwrap_or(png);
                    let _ = writeln!(
                        out,
                        "![{caption}]({})\n\n*{caption}* ([SVG]({}))\n",
                        rel.display(),
                        rel.with_extension("svg").display()
                    );
                }
                Block::Code(t) => {
                    let _ = writeln!(out, "```\n{t}\n```\n");
                }
                Block::List(items) => {
                    for item in items {
                        let _ = writeln!(out, "- {item}");
                    }
                    out.push('\n');
                }
            }
        }
        out
    }

    /// One HTML file with every figure inlined as a data URI. On load, a script records
    /// how many figures decoded (`data-figures-loaded` on `<body>`), for the browser test.
    pub fn html(&self) -> anyhow::Result<String> {
        let mut body = String::new();
        let mut figure_no = 0;
        for b in &self.blocks {
            match b {
                Block::Heading(l, t) => {
                    let _ = writeln!(body, "<h{l}>{}</h{l}>", inline(t));
                }
                Block::Para(t) => {
                    let _ = writeln!(body, "<p>{}</p>", inline(t));
                }
                Block::Table { header, rows } => {
                    body.push_str("<table>\n<thead><tr>");
                    for h in header {
                        let _ = write!(body, "<th>{}</th>", inline(h));
                    }
                    body.push_str("</tr></thead>\n<tbody>\n");
                    for r in rows {
                        body.push_str("<tr>");
                        for c in r {
                            let _ = write!(body, "<td>{}</td>", inline(c));
                        }
                        body.push_str("</tr>\n");
                    }
                    body.push_str("</tbody></table>\n");
                }
                Block::Figure { png, caption } => {
                    figure_no += 1;
                    let bytes = std::fs::read(png)
                        .map_err(|e| anyhow::anyhow!("{}: {e}", png.display()))?;
                    let data = base64::engine::general_purpose::STANDARD.encode(bytes);
                    let _ = writeln!(
                        body,
                        "<figure><img class=\"fig\" alt=\"{alt}\" src=\"data:image/png;base64,{data}\"><figcaption>Figure {figure_no}. {cap}</figcaption></figure>",
                        alt = escape(caption),
                        cap = inline(caption)
                    );
                }
                Block::Code(t) => {
                    let _ = writeln!(body, "<pre><code>{}</code></pre>", escape(t));
                }
                Block::List(items) => {
                    body.push_str("<ul>\n");
                    for item in items {
                        let _ = writeln!(body, "<li>{}</li>", inline(item));
                    }
                    body.push_str("</ul>\n");
                }
            }
        }
        Ok(format!(
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{title}</title>\n<style>{STYLE}</style>\n</head>\n<body data-figures=\"{n}\">\n<h1>{heading}</h1>\n{body}<script>{SCRIPT}</script>\n</body>\n</html>\n",
            title = escape(&self.title.replace('`', "")),
            heading = inline(&self.title),
            n = self.figures(),
        ))
    }
}

const STYLE: &str = "body{font-family:system-ui,-apple-system,'DejaVu Sans',sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222;line-height:1.45}\
table{border-collapse:collapse;margin:1em 0;font-size:0.9em}th,td{border:1px solid #ccc;padding:0.25em 0.6em;text-align:right}\
th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}figure{margin:1.5em 0}img.fig{max-width:100%;border:1px solid #eee}\
figcaption{font-size:0.9em;color:#555}code,pre{background:#f6f6f6;font-size:0.9em}pre{padding:0.6em;overflow-x:auto}";

const SCRIPT: &str = "window.addEventListener('load',function(){var imgs=document.querySelectorAll('img.fig');var ok=0;\
imgs.forEach(function(i){if(i.complete&&i.naturalWidth>0){ok++;}});document.body.setAttribute('data-figures-loaded',ok);});";

pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Escapes, then renders `code` spans and **bold** as HTML.
fn inline(s: &str) -> String {
    let mut out = String::new();
    for (i, part) in escape(s).split('`').enumerate() {
        if i % 2 == 1 {
            let _ = write!(out, "<code>{part}</code>");
        } else {
            for (j, p) in part.split("**").enumerate() {
                if j % 2 == 1 {
                    let _ = write!(out, "<strong>{p}</strong>");
                } else {
                    out.push_str(p);
                }
            }
        }
    }
    out
}
