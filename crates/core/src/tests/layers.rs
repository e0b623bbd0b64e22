//! The folders are layers (issue 53): every path names its layer, each layer imports only the
//! layers before it (`port`, then `wire`, `money`, `roads`, `testkit`), and no module reaches
//! back to itself through others. Read from the sources, so a new upward import or circle
//! fails here, not in a review.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The layers in order: each may import those before it.
const LAYERS: [&str; 5] = ["port", "wire", "money", "roads", "testkit"];

/// A module: its layer and its name (`("money", "write")`; `port` is its own layer).
type Module = (String, String);

/// The modules each module's product code (comments and its `#[cfg(test)] mod tests` left
/// out) names by a `crate::` path.
fn imports(source: &str) -> BTreeSet<Module> {
    let code = source
        .find("#[cfg(test)]\nmod tests")
        .map_or(source, |i| &source[..i]);
    let mut out = BTreeSet::new();
    for line in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
        for (i, _) in line.match_indices("crate::") {
            let rest = &line[i + "crate::".len()..];
            let end = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(rest.len());
            let path: Vec<&str> = rest[..end].split("::").collect();
            match path.as_slice() {
                ["port", ..] => {
                    out.insert(("port".to_owned(), "port".to_owned()));
                }
                // A group: `crate::money::{write::Write, record::StoryStep}`.
                [layer, ""] if LAYERS.contains(layer) => {
                    let group = rest[end..].trim_start_matches('{');
                    let group = &group[..group.find('}').unwrap_or(group.len())];
                    for name in group.split(',') {
                        let module = name.trim().split("::").next().unwrap_or_default();
                        if !module.is_empty() {
                            out.insert(((*layer).to_owned(), module.to_owned()));
                        }
                    }
                }
                [layer, module, ..] if LAYERS.contains(layer) => {
                    out.insert(((*layer).to_owned(), (*module).to_owned()));
                }
                _ => {}
            }
        }
    }
    out
}

/// Every violation in `graph`: an import of a later layer, or a circle of modules.
fn violations(graph: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<String> {
    let rank = |layer: &str| {
        LAYERS
            .iter()
            .position(|l| *l == layer)
            .unwrap_or(usize::MAX)
    };
    let mut found = Vec::new();
    for ((layer, module), targets) in graph {
        for (to_layer, to) in targets {
            if rank(to_layer) > rank(layer) {
                found.push(format!(
                    "{layer}::{module} imports {to_layer}::{to}, a later layer"
                ));
            }
        }
    }
    // A circle: a module reached again from itself.
    for start in graph.keys() {
        let mut seen = BTreeSet::new();
        let mut stack: Vec<(Module, Vec<String>)> =
            vec![(start.clone(), vec![format!("{}::{}", start.0, start.1)])];
        while let Some((at, path)) = stack.pop() {
            for next in graph.get(&at).into_iter().flatten().filter(|n| **n != at) {
                let name = format!("{}::{}", next.0, next.1);
                if next == start {
                    found.push(format!("a circle: {} -> {name}", path.join(" -> ")));
                } else if seen.insert(next.clone()) {
                    let mut longer = path.clone();
                    longer.push(name);
                    stack.push((next.clone(), longer));
                }
            }
        }
    }
    found.sort();
    found.dedup();
    found
}

/// A module's product source: its file, or a folder module's files (its tests left out) as one.
fn module_source(path: &Path) -> String {
    if !path.is_dir() {
        return std::fs::read_to_string(path).expect("a module's source");
    }
    let mut files: Vec<_> = std::fs::read_dir(path)
        .expect("a module's folder")
        .map(|e| e.expect("an entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs") && !p.ends_with("tests.rs"))
        .collect();
    files.sort();
    files
        .iter()
        .map(|f| std::fs::read_to_string(f).expect("a module's source"))
        .collect::<Vec<_>>()
        .join("\n")
        // Its tests are their own file: the declaration does not end the product code.
        .replace("#[cfg(test)]\nmod tests;", "")
}

/// The crate's module graph, read from `src/` (a folder module is one module).
fn graph() -> BTreeMap<Module, BTreeSet<Module>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut graph = BTreeMap::new();
    let port = std::fs::read_to_string(src.join("port.rs")).expect("port.rs");
    graph.insert(("port".to_owned(), "port".to_owned()), imports(&port));
    for layer in &LAYERS[1..] {
        for entry in std::fs::read_dir(src.join(layer)).expect("a layer's folder") {
            let path = entry.expect("an entry").path();
            let (Some(stem), true) = (
                path.file_stem().and_then(|s| s.to_str()),
                path.is_dir() || path.extension().is_some_and(|e| e == "rs"),
            ) else {
                continue;
            };
            if stem == "mod" {
                continue;
            }
            let source = module_source(&path);
            let mut targets = imports(&source);
            targets.remove(&((*layer).to_owned(), stem.to_owned()));
            graph.insert(((*layer).to_owned(), stem.to_owned()), targets);
        }
    }
    graph
}

#[test]
fn every_import_names_an_earlier_layer_and_no_module_reaches_back_to_itself() {
    let graph = graph();
    assert!(
        graph.len() > 20 && graph.contains_key(&("money".to_owned(), "write".to_owned())),
        "the modules were read, the folder ones too: {:?}",
        graph.keys()
    );
    assert_eq!(violations(&graph), Vec::<String>::new());
}

#[test]
fn an_upward_import_and_a_circle_are_found() {
    let module = |layer: &str, name: &str| (layer.to_owned(), name.to_owned());
    let source = "use crate::roads::fulfil::Fulfil;\n// crate::testkit::memory in a comment\nuse crate::money::{write::Write, record};\n#[cfg(test)]\nmod tests { use crate::testkit::memory; }";
    assert_eq!(
        imports(source),
        BTreeSet::from([
            module("money", "record"),
            module("money", "write"),
            module("roads", "fulfil")
        ])
    );
    let graph = BTreeMap::from([
        (module("money", "write"), imports(source)),
        (
            module("money", "record"),
            BTreeSet::from([module("money", "action")]),
        ),
        (
            module("money", "action"),
            BTreeSet::from([module("money", "record")]),
        ),
        (
            module("roads", "fulfil"),
            BTreeSet::from([module("port", "port")]),
        ),
    ]);
    assert_eq!(
        violations(&graph),
        [
            "a circle: money::action -> money::record -> money::action",
            "a circle: money::record -> money::action -> money::record",
            "money::write imports roads::fulfil, a later layer",
        ]
    );
}
