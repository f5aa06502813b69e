//! Imports point one way inside a crate, as they do between crates: no two
//! source files of a crate import each other, directly or round a circle.
//!
//! A textual scan, no compiler: each crate's module tree is followed from its
//! roots (`src/lib.rs`, `src/main.rs`, `src/bin/*.rs`) through `mod x;`
//! declarations, and every path in code that starts with `crate`, `super`,
//! `self`, a child module or a `use` name of its module is resolved against
//! that tree to the file that holds it. The rules:
//!
//! - A file that only declares `mod child;` does not import the child.
//! - A path to an item resolves to the deepest module file it names: a child
//!   `use super::X` imports its parent when `X` is written in the parent, a
//!   parent's `use child::X` imports the child.
//! - A `use` (re-exports included) is an import of what it names: a `mod.rs`
//!   with `pub use child::X` imports the child. Whoever names `X` through the
//!   re-export imports the file `X` comes from; a file outside the
//!   re-exporting module (not the module's own files, which may name their
//!   parent's re-exports) imports the re-exporting file too, since the name
//!   is that file's: `text.rs` naming `http::StopMatcher` imports
//!   `http/mod.rs`, and through it whatever `http/mod.rs` imports.
//! - Comments (doc links included) and strings are not imports. A
//!   `#[cfg(test)]` module inside a file is a leaf of its own, as a `tests.rs`
//!   file would be: nothing imports it, so it never closes a circle, and a unit
//!   test may set up through the crate's top.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

/// Circles not untied yet, each as its files (from `crates/`, sorted): the
/// test fails on any other circle, and on one of these once it is gone, so
/// that this list only shrinks.
const NOT_UNTIED_YET: &[&[&str]] = &[];

#[test]
fn no_two_source_files_of_a_crate_import_each_other() {
    let crates = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(crates)
        .expect("crates/")
        .map(|entry| entry.expect("crates/ entry").path())
        .filter(|dir| dir.join("src").is_dir())
        .collect();
    dirs.sort();
    assert!(dirs.len() >= 10, "found only {dirs:?} under crates/");
    let mut report = String::new();
    let mut found = Vec::new();
    for dir in &dirs {
        let graph = ImportGraph::of_crate(&dir.join("src"));
        assert!(graph.imports.len() > 1, "no imports found in {}", dir.display());
        for circle in graph.circles() {
            let files: Vec<String> = circle.iter().map(|f| short(f, crates)).collect();
            if !NOT_UNTIED_YET.iter().any(|known| *known == files) {
                report.push_str(&graph.describe(&circle, crates));
            }
            found.push(files);
        }
    }
    assert!(report.is_empty(), "source files that import each other, round a circle:\n{report}");
    let gone: Vec<&&[&str]> = NOT_UNTIED_YET.iter().filter(|known| !found.iter().any(|f| f == **known)).collect();
    assert!(gone.is_empty(), "circles listed in NOT_UNTIED_YET but not found (remove them): {gone:?}");
}

/// Most lines a source file may have: one file, one idea, a few hundred
/// lines (STYLE.md); a file that grows past this holds a second idea.
const MAX_LINES: usize = 800;

#[test]
fn no_source_file_is_over_800_lines() {
    let crates = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
    let mut stack = vec![crates.to_path_buf()];
    let (mut long, mut seen) = (Vec::new(), 0);
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.expect("an entry").path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if path.is_dir() {
                if name != "target" && !name.starts_with('.') {
                    stack.push(path);
                }
            } else if name.ends_with(".rs") {
                seen += 1;
                let lines = std::fs::read_to_string(&path).expect("a source file").lines().count();
                if lines > MAX_LINES {
                    long.push(format!("{} ({lines} lines)", short(&path, crates)));
                }
            }
        }
    }
    assert!(seen > 100, "found only {seen} source files under crates/");
    long.sort();
    assert!(long.is_empty(), "source files over {MAX_LINES} lines: {long:?}");
}

/// `file` as a path from `base`.
fn short(file: &Path, base: &Path) -> String {
    file.strip_prefix(base).unwrap_or(file).display().to_string()
}

/// Module path from the crate root: `["backend", "stream"]`.
type ModulePath = Vec<String>;

/// A path written in a file, before resolution.
struct Reference {
    file: usize,
    /// The module the path is written in (an inline `mod` included).
    scope: ModulePath,
    segments: Vec<String>,
    line: usize,
}

/// One crate tree (a library or a binary) as read from its files.
#[derive(Default)]
struct ModuleTree {
    files: Vec<PathBuf>,
    /// Every module, file or inline, and the file it is written in.
    modules: HashMap<ModulePath, usize>,
    /// The names each module's `use` items bind, with the path as written.
    bindings: HashMap<(ModulePath, String), Vec<String>>,
    references: Vec<Reference>,
}

/// Which file imports which, over all trees of a crate, with where.
#[derive(Default)]
struct ImportGraph {
    /// `from -> to -> (line, path)` of the first reference.
    imports: BTreeMap<PathBuf, BTreeMap<PathBuf, (usize, String)>>,
}

impl ImportGraph {
    fn of_crate(src: &Path) -> ImportGraph {
        let mut roots = vec![src.join("lib.rs"), src.join("main.rs")];
        if let Ok(bins) = std::fs::read_dir(src.join("bin")) {
            roots.extend(bins.map(|entry| entry.expect("bin/ entry").path()));
        }
        let mut graph = ImportGraph::default();
        for root in roots.into_iter().filter(|root| root.is_file()) {
            let tree = ModuleTree::read(root);
            for reference in &tree.references {
                let from = &tree.files[reference.file];
                graph.imports.entry(from.clone()).or_default();
                for to in tree.resolve(reference) {
                    if to != reference.file {
                        let to = tree.files[to].clone();
                        let evidence = (reference.line, reference.segments.join("::"));
                        graph.imports.get_mut(from).expect("entry").entry(to).or_insert(evidence);
                    }
                }
            }
        }
        graph
    }

    /// The strongly connected components of more than one file (Tarjan).
    fn circles(&self) -> Vec<Vec<PathBuf>> {
        struct Search<'a> {
            graph: &'a ImportGraph,
            index: HashMap<&'a PathBuf, usize>,
            low: HashMap<&'a PathBuf, usize>,
            stack: Vec<&'a PathBuf>,
            circles: Vec<Vec<PathBuf>>,
        }
        impl<'a> Search<'a> {
            fn visit(&mut self, file: &'a PathBuf) {
                let next = self.index.len();
                self.index.insert(file, next);
                self.low.insert(file, next);
                self.stack.push(file);
                for to in self.graph.imports.get(file).into_iter().flat_map(BTreeMap::keys) {
                    if !self.index.contains_key(to) {
                        self.visit(to);
                        let low = self.low[file].min(self.low[to]);
                        self.low.insert(file, low);
                    } else if self.stack.contains(&to) {
                        let low = self.low[file].min(self.index[to]);
                        self.low.insert(file, low);
                    }
                }
                if self.low[file] == self.index[file] {
                    let at = self.stack.iter().rposition(|f| *f == file).expect("on the stack");
                    let component: Vec<PathBuf> = self.stack.drain(at..).cloned().collect();
                    if component.len() > 1 {
                        self.circles.push(component);
                    }
                }
            }
        }
        let mut search =
            Search { graph: self, index: HashMap::new(), low: HashMap::new(), stack: Vec::new(), circles: Vec::new() };
        for file in self.imports.keys() {
            if !search.index.contains_key(file) {
                search.visit(file);
            }
        }
        for circle in &mut search.circles {
            circle.sort();
        }
        search.circles
    }

    /// The files of `circle` and the imports between them, paths from `base`.
    fn describe(&self, circle: &[PathBuf], base: &Path) -> String {
        let names: Vec<String> = circle.iter().map(|file| short(file, base)).collect();
        let mut text = format!("- {}\n", names.join(", "));
        for from in circle {
            for (to, (line, path)) in &self.imports[from] {
                if circle.contains(to) {
                    text.push_str(&format!("    {}:{line} -> {} ({path})\n", short(from, base), short(to, base)));
                }
            }
        }
        text
    }
}

impl ModuleTree {
    /// Reads the tree rooted at `root` and every file its `mod` items name.
    fn read(root: PathBuf) -> ModuleTree {
        let mut tree = ModuleTree::default();
        let mut queue = vec![(root, ModulePath::new())];
        while let Some((file, module)) = queue.pop() {
            let id = tree.files.len();
            let source = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            tree.files.push(file.clone());
            tree.modules.insert(module.clone(), id);
            let owns_directory =
                matches!(file.file_name().and_then(|n| n.to_str()), Some("lib.rs" | "main.rs" | "mod.rs"))
                    || module.is_empty();
            let directory = if owns_directory {
                file.parent().expect("a directory").to_path_buf()
            } else {
                file.with_extension("")
            };
            for child in tree.scan(id, &module, &tokens(&source)) {
                let mut dir = directory.clone();
                dir.extend(&child[module.len()..child.len() - 1]);
                let name = child.last().expect("a name");
                let flat = dir.join(format!("{name}.rs"));
                let nested = dir.join(name).join("mod.rs");
                if let Some(path) = [flat, nested].into_iter().find(|path| path.is_file()) {
                    queue.push((path, child));
                }
            }
        }
        tree
    }

    /// Records the modules, `use` names and paths of one file; returns the
    /// modules it declares in other files.
    fn scan(&mut self, file: usize, module: &ModulePath, tokens: &[Token]) -> Vec<ModulePath> {
        let mut declared = Vec::new();
        // Inline modules open: (brace depth inside, path).
        let mut inline: Vec<(usize, ModulePath)> = Vec::new();
        let mut depth = 0;
        // The depth inside the `#[cfg(test)]` module open, if one is.
        let mut tests_open: Option<usize> = None;
        let mut i = 0;
        while i < tokens.len() {
            let scope = inline.last().map_or(module, |(_, path)| path).clone();
            match tokens[i].text.as_str() {
                "{" => depth += 1,
                "}" => {
                    if inline.last().is_some_and(|(open, _)| *open == depth) {
                        inline.pop();
                    }
                    if tests_open == Some(depth) {
                        tests_open = None;
                    }
                    depth = depth.saturating_sub(1);
                }
                "mod" if i + 2 < tokens.len() && is_ident(&tokens[i + 1].text) => {
                    let mut child = scope.clone();
                    child.push(tokens[i + 1].text.clone());
                    match tokens[i + 2].text.as_str() {
                        ";" => declared.push(child),
                        "{" => {
                            self.modules.insert(child.clone(), file);
                            depth += 1;
                            if is_test_only(&tokens[..i]) || tests_open.is_some() {
                                tests_open.get_or_insert(depth);
                            }
                            inline.push((depth, child));
                            i += 2;
                        }
                        _ => {}
                    }
                }
                "use" => {
                    let end = tokens[i..].iter().position(|t| t.text == ";").map_or(tokens.len(), |n| i + n);
                    let mut leaves = Vec::new();
                    use_tree(&tokens[i + 1..end], Vec::new(), &mut leaves);
                    for (segments, name) in leaves {
                        if let Some(name) = name {
                            self.bindings.insert((scope.clone(), name), segments.clone());
                        }
                        if tests_open.is_none() {
                            self.references.push(Reference {
                                file,
                                scope: scope.clone(),
                                segments,
                                line: tokens[i].line,
                            });
                        }
                    }
                    i = end;
                }
                text if is_ident(text) && tokens.get(i + 1).is_some_and(|t| t.text == "::") => {
                    let after_path_separator = i > 0 && tokens[i - 1].text == "::";
                    let mut segments = vec![text.to_string()];
                    let mut j = i + 1;
                    while j + 1 < tokens.len() && tokens[j].text == "::" && is_ident(&tokens[j + 1].text) {
                        segments.push(tokens[j + 1].text.clone());
                        j += 2;
                    }
                    if !after_path_separator && tests_open.is_none() {
                        self.references.push(Reference { file, scope, segments, line: tokens[i].line });
                    }
                    i = j;
                    continue;
                }
                _ => {}
            }
            i += 1;
        }
        declared
    }

    /// The files `reference` names in this tree: the one that holds what it
    /// names, and the files of the modules outside the reference's own
    /// whose re-exports the path goes through.
    fn resolve(&self, reference: &Reference) -> Vec<usize> {
        let Some(path) = self.absolute(&reference.scope, &reference.segments, 0) else { return Vec::new() };
        let mut through = Vec::new();
        let mut files: Vec<usize> = self.file_of(&path, 0, &mut through).into_iter().collect();
        for module in through {
            if !reference.scope.starts_with(&module) {
                files.extend(self.modules.get(&module).copied());
            }
        }
        files
    }

    /// `segments` written in `scope` as a path from the crate root, or `None`
    /// when it leads out of the crate.
    fn absolute(&self, scope: &ModulePath, segments: &[String], hops: usize) -> Option<ModulePath> {
        let (first, rest) = segments.split_first()?;
        match first.as_str() {
            "crate" | "$crate" => Some(rest.to_vec()),
            "self" => Some([scope.as_slice(), rest].concat()),
            "super" => {
                let ups = segments.iter().take_while(|s| *s == "super").count();
                let base = scope.get(..scope.len().checked_sub(ups)?)?;
                Some([base, &segments[ups..]].concat())
            }
            name => {
                let mut child = scope.clone();
                child.push(name.to_string());
                if self.modules.contains_key(&child) {
                    Some([child.as_slice(), rest].concat())
                } else if let Some(bound) = self.bindings.get(&(scope.clone(), name.to_string())) {
                    if hops > 8 || bound.first().is_some_and(|s| s == name) && bound.len() == 1 {
                        return None;
                    }
                    let target = self.absolute(scope, bound, hops + 1)?;
                    Some([target.as_slice(), rest].concat())
                } else {
                    None
                }
            }
        }
    }

    /// The file holding what `path` names: the deepest module on it, or the
    /// file a `use` on the way re-exports from.
    /// Records in `through` each module whose re-export the path follows.
    fn file_of(&self, path: &ModulePath, hops: usize, through: &mut Vec<ModulePath>) -> Option<usize> {
        let mut module = ModulePath::new();
        for (at, segment) in path.iter().enumerate() {
            let mut child = module.clone();
            child.push(segment.clone());
            if self.modules.contains_key(&child) {
                module = child;
                continue;
            }
            if let Some(bound) = self.bindings.get(&(module.clone(), segment.clone())) {
                if hops > 8 {
                    break;
                }
                let target = self.absolute(&module, bound, hops + 1)?;
                through.push(module.clone());
                return self.file_of(&[target.as_slice(), &path[at + 1..]].concat(), hops + 1, through);
            }
            break;
        }
        self.modules.get(&module).copied()
    }
}

/// Expands a `use` tree into its leaves: the full path and the name it binds
/// (`None` for a glob or `as _`).
fn use_tree(tokens: &[Token], prefix: Vec<String>, leaves: &mut Vec<(Vec<String>, Option<String>)>) {
    let mut path = prefix;
    let mut i = 0;
    if tokens.first().is_some_and(|t| t.text == "::") {
        path.push(String::new());
        i = 1;
    }
    while i < tokens.len() {
        match tokens[i].text.as_str() {
            "::" => i += 1,
            "*" => {
                leaves.push((path, None));
                return;
            }
            "{" => {
                // Split the group at its top-level commas.
                let mut depth = 0;
                let mut start = i + 1;
                for j in i + 1..tokens.len() {
                    match tokens[j].text.as_str() {
                        "{" => depth += 1,
                        "}" if depth > 0 => depth -= 1,
                        "," | "}" if depth == 0 => {
                            if j > start {
                                use_tree(&tokens[start..j], path.clone(), leaves);
                            }
                            start = j + 1;
                            if tokens[j].text == "}" {
                                return;
                            }
                        }
                        _ => {}
                    }
                }
                return;
            }
            "as" => {
                let alias = tokens.get(i + 1).map(|t| t.text.clone()).filter(|a| a != "_");
                leaves.push((path, alias));
                return;
            }
            "self" if !path.is_empty() => i += 1,
            text if is_ident(text) => {
                path.push(text.to_string());
                i += 1;
            }
            _ => return,
        }
    }
    let name = path.last().cloned();
    leaves.push((path, name));
}

/// A word or punctuation of Rust source; comments and literals are dropped.
struct Token {
    text: String,
    line: usize,
}

/// Whether the item after `before` is marked `#[cfg(test)]` (maybe `pub`).
fn is_test_only(before: &[Token]) -> bool {
    let words: Vec<&str> = before.iter().rev().take(8).map(|t| t.text.as_str()).collect();
    let attribute = ["]", ")", "test", "(", "cfg", "[", "#"];
    words.starts_with(&attribute) || words.get(1..).is_some_and(|rest| rest.starts_with(&attribute))
}

fn is_ident(text: &str) -> bool {
    text.starts_with(|c: char| c.is_alphabetic() || c == '_' || c == '$') && text != "$"
}

/// Splits Rust source into words and `::`/single-character punctuation,
/// skipping comments, strings and character literals.
fn tokens(source: &str) -> Vec<Token> {
    let chars: Vec<char> = source.chars().collect();
    let mut tokens = Vec::new();
    let mut line = 1;
    let mut i = 0;
    let at = |i: usize| chars.get(i).copied().unwrap_or('\0');
    while i < chars.len() {
        let c = chars[i];
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if c == '/' && at(i + 1) == '/' {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && at(i + 1) == '*' {
            let mut nesting = 0;
            while i < chars.len() {
                if chars[i] == '/' && at(i + 1) == '*' {
                    nesting += 1;
                    i += 2;
                } else if chars[i] == '*' && at(i + 1) == '/' {
                    nesting -= 1;
                    i += 2;
                    if nesting == 0 {
                        break;
                    }
                } else {
                    line += usize::from(chars[i] == '\n');
                    i += 1;
                }
            }
        } else if c == '"' {
            i = skip_string(&chars, i, 0, &mut line);
        } else if c == '\'' {
            if at(i + 1) == '\\' {
                i += 3; // the quote, the backslash and the escaped character
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if at(i + 2) == '\'' {
                i += 3;
            } else {
                i += 1; // a lifetime: its name follows as a word
            }
        } else if c.is_alphanumeric() || c == '_' || (c == '$' && at(i + 1).is_alphabetic()) {
            let start = i;
            i += 1;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            match (word.as_str(), at(i)) {
                ("r" | "br" | "cr", '"' | '#') if at(i) == '"' || matches!(at(i + 1), '"' | '#') => {
                    let hashes = chars[i..].iter().take_while(|c| **c == '#').count();
                    i = skip_string(&chars, i + hashes, hashes, &mut line);
                }
                ("r", '#') => {} // a raw identifier: `#` and the name follow
                ("b" | "c", '"') => i = skip_string(&chars, i, 0, &mut line),
                ("b", '\'') => {}
                _ => tokens.push(Token { text: word, line }),
            }
        } else if c == ':' && at(i + 1) == ':' {
            tokens.push(Token { text: "::".into(), line });
            i += 2;
        } else {
            tokens.push(Token { text: c.to_string(), line });
            i += 1;
        }
    }
    tokens
}

/// The index after the string literal whose opening quote is at `open`,
/// closed by a quote and `hashes` `#`s (a raw string when `hashes > 0` or
/// `raw`); counts the lines it spans.
fn skip_string(chars: &[char], open: usize, hashes: usize, line: &mut usize) -> usize {
    let raw = hashes > 0 || open > 0 && chars[open - 1] == 'r';
    let mut i = open + 1;
    while i < chars.len() {
        match chars[i] {
            '\\' if !raw => {
                *line += usize::from(chars.get(i + 1) == Some(&'\n'));
                i += 1;
            }
            '\n' => *line += 1,
            '"' if chars[i + 1..].iter().take(hashes).filter(|c| **c == '#').count() == hashes => {
                return i + 1 + hashes;
            }
            _ => {}
        }
        i += 1;
    }
    i
}
