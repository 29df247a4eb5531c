//! The import graph between a crate's top-level modules, read from its `src/` (shared by the
//! `layers.rs` test of berth-routing and berth-gateway through `#[path]`).
//!
//! An edge A -> X is a `crate::X` (also inside `use crate::{X, ..}`) or a `super::X` that
//! resolves to the crate root, written in a file of module A, outside comments, string and char
//! literals, `#[cfg(test)]` items and `tests` folders / `tests.rs` files. Re-exports at the crate
//! root (`crate::Name` for `pub use x::Name` in lib.rs) count as edges to the module they name.
//! docs/architecture.md describes the layers this check keeps acyclic.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Module -> the top-level modules it imports.
pub(crate) type Graph = BTreeMap<String, BTreeSet<String>>;

/// Reads `src/` of the crate at `root` into its module graph.
pub(crate) fn read(root: &Path) -> Graph {
    let src = root.join("src");
    let mut tops = BTreeSet::new();
    for entry in std::fs::read_dir(&src).expect("read src/") {
        let entry = entry.expect("dir entry");
        let name = entry.file_name().to_string_lossy().into_owned();
        if entry.path().is_dir() {
            tops.insert(name);
        } else if let Some(stem) = name.strip_suffix(".rs")
            && stem != "lib"
            && stem != "main"
        {
            tops.insert(stem.to_string());
        }
    }
    let lib = code_only(&std::fs::read_to_string(src.join("lib.rs")).expect("lib.rs"));
    let reexports = root_reexports(&lib, &tops);
    let mut graph: Graph = tops.iter().map(|t| (t.clone(), BTreeSet::new())).collect();
    let mut files = Vec::new();
    collect(&src, &mut files);
    for file in files {
        let rel = file.strip_prefix(&src).expect("under src");
        let mut parts: Vec<String> = rel
            .iter()
            .map(|p| p.to_string_lossy().into_owned())
            .collect();
        let last = parts.pop().expect("file name");
        let stem = last.trim_end_matches(".rs").to_string();
        if parts.is_empty() && (stem == "lib" || stem == "main") {
            continue;
        }
        if stem == "tests" || parts.iter().skip(1).any(|p| p == "tests") {
            continue;
        }
        if stem != "mod" {
            parts.push(stem);
        }
        let top = parts[0].clone();
        let text = code_only(&std::fs::read_to_string(&file).expect("read source"));
        let text = without_test_items(&text);
        for target in imports(&text, &parts, &reexports) {
            if target != top && tops.contains(&target) {
                graph.get_mut(&top).expect("top module").insert(target);
            }
        }
    }
    graph
}

/// Cycles as strongly connected components of more than one module (Tarjan).
pub(crate) fn cycles(graph: &Graph) -> Vec<Vec<String>> {
    struct Walk<'g> {
        graph: &'g Graph,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on_stack: BTreeSet<&'g str>,
        found: Vec<Vec<String>>,
    }
    fn visit<'g>(w: &mut Walk<'g>, v: &'g str) {
        let n = w.index.len();
        w.index.insert(v, n);
        w.low.insert(v, n);
        w.stack.push(v);
        w.on_stack.insert(v);
        let graph = w.graph;
        for next in graph.get(v).into_iter().flatten() {
            let next = next.as_str();
            if !w.index.contains_key(next) {
                visit(w, next);
                let l = w.low[v].min(w.low[next]);
                w.low.insert(v, l);
            } else if w.on_stack.contains(next) {
                let l = w.low[v].min(w.index[next]);
                w.low.insert(v, l);
            }
        }
        if w.low[v] == w.index[v] {
            let mut comp = Vec::new();
            while let Some(x) = w.stack.pop() {
                w.on_stack.remove(x);
                comp.push(x.to_string());
                if x == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                w.found.push(comp);
            }
        }
    }
    let mut w = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !w.index.contains_key(v.as_str()) {
            visit(&mut w, v);
        }
    }
    w.found
}

/// The graph as text, one `a -> b c` line per module, for failure messages.
/// The whole check both `layers.rs` tests make: the crate at `root` has no import circle between
/// its top-level modules, and every edge points to a strictly lower layer of the table under
/// `section` in docs/architecture.md (`doc`).
pub(crate) fn assert_one_way(root: &Path, doc: &str, section: &str) {
    let graph = read(root);
    let cycles = cycles(&graph);
    assert!(
        cycles.is_empty(),
        "import circles between top-level modules: {cycles:?}\n{}",
        render(&graph)
    );
    let wrong = layer_violations(&graph, &layers(doc, section));
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

pub(crate) fn render(graph: &Graph) -> String {
    let mut out = String::new();
    for (from, to) in graph {
        let to: Vec<&str> = to.iter().map(String::as_str).collect();
        out.push_str(&format!("{from} -> {}\n", to.join(" ")));
    }
    out
}

fn collect(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("dir entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            collect(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `pub use x::Name` / `pub use x::{A, B}` at the crate root: Name -> x.
fn root_reexports(lib: &str, tops: &BTreeSet<String>) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    for stmt in lib.split(';') {
        let stmt = stmt.trim();
        let Some(rest) = stmt
            .strip_prefix("pub use ")
            .or_else(|| stmt.strip_prefix("pub(crate) use "))
        else {
            continue;
        };
        let rest = rest.trim().trim_start_matches("crate::");
        let Some((module, tail)) = rest.split_once("::") else {
            continue;
        };
        if !tops.contains(module) {
            continue;
        }
        let tail = tail.trim().trim_start_matches('{').trim_end_matches('}');
        for item in tail.split(',') {
            let item = item.trim();
            let name = match item.split_once(" as ") {
                Some((_, alias)) => alias.trim(),
                None => item.rsplit("::").next().unwrap_or(item),
            };
            if !name.is_empty() {
                map.insert(name.to_string(), module.to_string());
            }
        }
    }
    map
}

/// The top-level modules a file's code names through `crate::` or a `super::` chain that
/// reaches the crate root.
fn imports(
    text: &str,
    module_path: &[String],
    reexports: &BTreeMap<String, String>,
) -> Vec<String> {
    let mut out = Vec::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let at_word_start = i == 0 || !is_ident(bytes[i - 1]);
        if at_word_start && text[i..].starts_with("crate::") {
            i += "crate::".len();
            i = path_heads(text, i, &mut out, reexports);
            continue;
        }
        if at_word_start && text[i..].starts_with("super::") {
            let mut depth = 0;
            while text[i..].starts_with("super::") {
                depth += 1;
                i += "super::".len();
            }
            if depth >= module_path.len() {
                i = path_heads(text, i, &mut out, reexports);
            }
            continue;
        }
        i += 1;
    }
    out
}

/// Reads the first segment after `crate::` (or each first segment of a `{..}` group) and
/// returns the position after what it consumed.
fn path_heads(
    text: &str,
    start: usize,
    out: &mut Vec<String>,
    reexports: &BTreeMap<String, String>,
) -> usize {
    let bytes = text.as_bytes();
    let mut push = |name: &str| {
        if let Some(module) = reexports.get(name) {
            out.push(module.clone());
        } else {
            out.push(name.to_string());
        }
    };
    if bytes.get(start) == Some(&b'{') {
        let mut depth = 0;
        let mut i = start;
        let mut expect_head = true;
        while i < bytes.len() {
            match bytes[i] {
                b'{' => {
                    depth += 1;
                    expect_head = depth == 1;
                }
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        return i + 1;
                    }
                }
                b',' if depth == 1 => expect_head = true,
                c if is_ident(c) && expect_head => {
                    let end = ident_end(bytes, i);
                    push(&text[i..end]);
                    expect_head = false;
                    i = end;
                    continue;
                }
                c if !c.is_ascii_whitespace() => expect_head = false,
                _ => {}
            }
            i += 1;
        }
        return i;
    }
    let end = ident_end(bytes, start);
    if end > start {
        push(&text[start..end]);
    }
    end
}

fn ident_end(bytes: &[u8], mut i: usize) -> usize {
    while i < bytes.len() && is_ident(bytes[i]) {
        i += 1;
    }
    i
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// The source with comments, string literals and char literals blanked out (lifetimes kept).
fn code_only(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
        } else if c == b'r'
            && (i == 0 || !is_ident(b[i - 1]))
            && matches!(b.get(i + 1), Some(b'"') | Some(b'#'))
        {
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&b'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&b'"') {
                out.push('r');
                i += 1;
                continue;
            }
            j += 1;
            let close: String = std::iter::once('"')
                .chain((0..hashes).map(|_| '#'))
                .collect();
            match src[j..].find(&close) {
                Some(k) => i = j + k + close.len(),
                None => i = b.len(),
            }
            out.push_str("\"\"");
        } else if c == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                if b[i] == b'\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == b'\'' {
            // A char literal is 'x' or '\..'; anything else is a lifetime or label.
            if b.get(i + 1) == Some(&b'\\') {
                let mut j = i + 2;
                while j < b.len() && b[j] != b'\'' {
                    j += 1;
                }
                i = j + 1;
                out.push_str("' '");
            } else if let Some(ch) = src[i + 1..].chars().next() {
                let after = i + 1 + ch.len_utf8();
                if b.get(after) == Some(&b'\'') {
                    i = after + 1;
                    out.push_str("' '");
                } else {
                    out.push('\'');
                    i += 1;
                }
            } else {
                i += 1;
            }
        } else {
            let ch = src[i..].chars().next().expect("char");
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

/// The code without items marked `#[cfg(test)]` (a `mod x;`, a `use`, or a braced item).
fn without_test_items(text: &str) -> String {
    const MARK: &str = "#[cfg(test)]";
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(MARK) {
        out.push_str(&rest[..at]);
        let after = &rest[at + MARK.len()..];
        let b = after.as_bytes();
        let mut i = 0;
        let mut depth = 0usize;
        let mut end = after.len();
        while i < b.len() {
            match b[i] {
                b';' | b',' if depth == 0 => {
                    end = i + 1;
                    break;
                }
                b'{' | b'(' | b'[' => depth += 1,
                b'}' | b')' | b']' => {
                    if depth == 0 {
                        // The item ends where its enclosing block closes (a struct field).
                        end = i;
                        break;
                    }
                    depth -= 1;
                    if depth == 0 && b[i] == b'}' {
                        end = i + 1;
                        break;
                    }
                }
                _ => {}
            }
            i += 1;
        }
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

/// The layer of each module, from the markdown table under `## {heading}` in `doc`: rows
/// `| N | `a`, `b` | ... |` (N the layer, lowest 0; every module in backticks of the second
/// column is in it).
pub(crate) fn layers(doc: &str, heading: &str) -> BTreeMap<String, u32> {
    let mut out = BTreeMap::new();
    let start = format!("## {heading}");
    let Some(at) = doc.find(&start) else {
        return out;
    };
    let section = &doc[at + start.len()..];
    let section = &section[..section.find("\n## ").unwrap_or(section.len())];
    for line in section.lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let (Some(layer), Some(modules)) = (cells.get(1), cells.get(2)) else {
            continue;
        };
        let Ok(layer) = layer.parse::<u32>() else {
            continue;
        };
        for (i, part) in modules.split('`').enumerate() {
            if i % 2 == 1 {
                out.insert(part.to_string(), layer);
            }
        }
    }
    out
}

/// Modules without a layer, and imports that do not point to a strictly lower layer.
pub(crate) fn layer_violations(graph: &Graph, layers: &BTreeMap<String, u32>) -> Vec<String> {
    let mut out = Vec::new();
    for module in graph.keys() {
        if !layers.contains_key(module) {
            out.push(format!("`{module}` has no layer in docs/architecture.md"));
        }
    }
    for (from, to) in graph {
        for target in to {
            if let (Some(a), Some(b)) = (layers.get(from), layers.get(target))
                && b >= a
            {
                out.push(format!(
                    "{from} (layer {a}) imports {target} (layer {b}): imports point to lower layers"
                ));
            }
        }
    }
    out
}
