//! Which module of a crate names which other module, read from the source files: `use`
//! declarations and `a::b::c` paths in code, followed through re-exports (`pub use x as y`) to
//! the module that defines the item. Inline modules (`mod tests { .. }`) are modules of their
//! own. A scan, not a compiler: comments, strings and character literals are skipped, macros
//! are not expanded, and a path through a glob import is followed only to the names the glob's
//! module declares or re-exports.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The module graph: each module path (`decode::event`; `crate` for the root) and the modules
/// its code names.
#[derive(Debug, Default)]
pub struct Graph {
    pub edges: BTreeMap<String, BTreeSet<String>>,
}

impl Graph {
    /// The graph of the crate whose source folder is `src` (holding `lib.rs` or `main.rs`).
    pub fn of_crate(src: &Path) -> Graph {
        let files = crate::files_below(src)
            .into_iter()
            .filter(|p| p.extension().is_some_and(|e| e == "rs"))
            .map(|p| {
                let rel = p
                    .strip_prefix(src)
                    .unwrap_or(&p)
                    .to_string_lossy()
                    .into_owned();
                let text = std::fs::read_to_string(&p)
                    .unwrap_or_else(|e| panic!("reading {}: {e}", p.display()));
                (rel.replace('\\', "/"), text)
            })
            .collect::<Vec<_>>();
        Graph::of_sources(&files)
    }

    /// The graph of a crate given as (path below `src/`, text) pairs.
    pub fn of_sources(files: &[(String, String)]) -> Graph {
        let mut tree = Tree::default();
        tree.module(&[]);
        for (rel, text) in files {
            let id = tree.module(&file_module(rel));
            tree.read(id, &lex(text));
        }
        let mut graph = Graph::default();
        for id in 0..tree.mods.len() {
            let from = tree.name(id);
            let to = graph.edges.entry(from).or_default();
            for path in &tree.mods[id].refs {
                if let Some(t) = tree.resolve(id, path, 0).map(Target::module)
                    && t != id
                {
                    to.insert(tree.name(t));
                }
            }
        }
        graph
    }

    /// Every import cycle, one per strongly connected group of modules, as the group's modules
    /// (sorted) and one cycle through them written `a -> b -> a`.
    pub fn cycles(&self) -> Vec<(Vec<String>, String)> {
        let nodes: Vec<&String> = self.edges.keys().collect();
        let index: BTreeMap<&String, usize> =
            nodes.iter().enumerate().map(|(i, n)| (*n, i)).collect();
        let succ: Vec<Vec<usize>> = nodes
            .iter()
            .map(|n| {
                self.edges[*n]
                    .iter()
                    .filter_map(|t| index.get(t).copied())
                    .collect()
            })
            .collect();
        strongly_connected(&succ)
            .into_iter()
            .filter(|group| group.len() > 1)
            .map(|group| {
                let mut names: Vec<String> = group.iter().map(|&i| nodes[i].clone()).collect();
                names.sort();
                let start = index[&names[0]];
                let members: BTreeSet<usize> = group.into_iter().collect();
                let path = cycle_through(start, &succ, &members)
                    .iter()
                    .map(|&i| nodes[i].as_str())
                    .collect::<Vec<_>>()
                    .join(" -> ");
                (names, path)
            })
            .collect()
    }
}

/// The module a file holds: `lib.rs` the root, `a/mod.rs` and `a.rs` `a`, `a/b.rs` `a::b`.
fn file_module(rel: &str) -> Vec<String> {
    let mut parts: Vec<String> = rel.split('/').map(str::to_string).collect();
    let last = parts.pop().unwrap_or_default();
    let stem = last.strip_suffix(".rs").unwrap_or(&last);
    if !matches!(stem, "mod" | "lib" | "main") || !parts.is_empty() && stem != "mod" {
        parts.push(stem.to_string());
    }
    parts
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Sym(&'static str),
}

/// The identifiers and the few symbols paths are made of; comments, literals and lifetimes
/// are dropped.
fn lex(text: &str) -> Vec<Tok> {
    let c: Vec<char> = text.chars().collect();
    let at = |i: usize| c.get(i).copied().unwrap_or('\0');
    let mut out = Vec::new();
    let mut i = 0;
    // Past a quoted literal starting at `i` (on the quote), with escapes.
    let quoted = |mut i: usize, q: char| {
        i += 1;
        while i < c.len() && c[i] != q {
            i += if c[i] == '\\' { 2 } else { 1 };
        }
        i + 1
    };
    while i < c.len() {
        let ch = c[i];
        if ch.is_whitespace() {
            i += 1;
        } else if ch == '/' && at(i + 1) == '/' {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && at(i + 1) == '*' {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if ch == '"' {
            i = quoted(i, '"');
        } else if ch == '\'' {
            if at(i + 1) == '\\' || at(i + 2) == '\'' {
                i = quoted(i, '\'');
            } else {
                // A lifetime or a label: its name is not a path.
                i += 1;
                while at(i).is_alphanumeric() || at(i) == '_' {
                    i += 1;
                }
            }
        } else if ch.is_alphabetic() || ch == '_' {
            let start = i;
            while at(i).is_alphanumeric() || at(i) == '_' {
                i += 1;
            }
            let word: String = c[start..i].iter().collect();
            let hashes = c[i..].iter().take_while(|&&h| h == '#').count();
            if matches!(word.as_str(), "r" | "br" | "cr") && at(i + hashes) == '"' {
                i += hashes + 1;
                while i < c.len() && !(c[i] == '"' && (1..=hashes).all(|k| at(i + k) == '#')) {
                    i += 1;
                }
                i += hashes + 1;
            } else if word == "r" && hashes == 1 {
                // `r#type`: a raw identifier.
                let s = i + 1;
                i = s;
                while at(i).is_alphanumeric() || at(i) == '_' {
                    i += 1;
                }
                out.push(Tok::Ident(c[s..i].iter().collect()));
            } else if matches!(word.as_str(), "b" | "c") && at(i) == '"' {
                i = quoted(i, '"');
            } else if word == "b" && at(i) == '\'' {
                i = quoted(i, '\'');
            } else {
                out.push(Tok::Ident(word));
            }
        } else if ch.is_ascii_digit() {
            while at(i).is_alphanumeric() || at(i) == '_' {
                i += 1;
            }
        } else if ch == ':' && at(i + 1) == ':' {
            out.push(Tok::Sym("::"));
            i += 2;
        } else {
            out.push(Tok::Sym(match ch {
                '{' => "{",
                '}' => "}",
                ';' => ";",
                ',' => ",",
                '*' => "*",
                '<' => "<",
                _ => "?",
            }));
            i += 1;
        }
    }
    out
}

#[derive(Default)]
struct Module {
    segments: Vec<String>,
    parent: Option<usize>,
    children: BTreeMap<String, usize>,
    /// Names bound by `use` (the alias or the last segment), to the path as written.
    aliases: BTreeMap<String, Vec<String>>,
    globs: Vec<Vec<String>>,
    /// Every path the module's code names, `use` paths included.
    refs: Vec<Vec<String>>,
}

#[derive(Default)]
struct Tree {
    mods: Vec<Module>,
}

#[derive(Clone, Copy)]
enum Target {
    Module(usize),
    /// An item (function, type, constant) of this module.
    Item(usize),
}

impl Target {
    fn module(self) -> usize {
        match self {
            Target::Module(m) | Target::Item(m) => m,
        }
    }
}

impl Tree {
    /// The module at `segments`, created (with its ancestors) if new.
    fn module(&mut self, segments: &[String]) -> usize {
        let mut cur = 0;
        if self.mods.is_empty() {
            self.mods.push(Module::default());
        }
        for (n, s) in segments.iter().enumerate() {
            cur = match self.mods[cur].children.get(s) {
                Some(&c) => c,
                None => {
                    let id = self.mods.len();
                    self.mods.push(Module {
                        segments: segments[..=n].to_vec(),
                        parent: Some(cur),
                        ..Module::default()
                    });
                    self.mods[cur].children.insert(s.clone(), id);
                    id
                }
            };
        }
        cur
    }

    fn name(&self, id: usize) -> String {
        match self.mods[id].segments.is_empty() {
            true => "crate".to_string(),
            false => self.mods[id].segments.join("::"),
        }
    }

    /// Reads a file's tokens into module `id`, inline modules into children of their own.
    fn read(&mut self, id: usize, toks: &[Tok]) {
        // (module, brace depth its body started at)
        let mut stack = vec![(id, 0usize)];
        let mut depth = 0;
        let mut i = 0;
        while i < toks.len() {
            let cur = stack.last().map_or(id, |s| s.0);
            match &toks[i] {
                Tok::Ident(w) if w == "mod" => {
                    if let (Some(Tok::Ident(name)), Some(Tok::Sym("{"))) =
                        (toks.get(i + 1), toks.get(i + 2))
                    {
                        let mut segs = self.mods[cur].segments.clone();
                        segs.push(name.clone());
                        let child = self.module(&segs);
                        depth += 1;
                        stack.push((child, depth));
                        i += 3;
                        continue;
                    }
                }
                Tok::Ident(w)
                    if w == "use"
                        && !matches!(i.checked_sub(1).map(|p| &toks[p]), Some(Tok::Sym("::"))) =>
                {
                    let mut uses = Vec::new();
                    i = use_tree(toks, i + 1, Vec::new(), &mut uses);
                    for (path, bind) in uses {
                        match bind {
                            Bind::Glob => self.mods[cur].globs.push(path.clone()),
                            Bind::Name(n) if n != "_" => {
                                self.mods[cur].aliases.insert(n, path.clone());
                            }
                            Bind::Name(_) => {}
                        }
                        self.mods[cur].refs.push(path);
                    }
                    continue;
                }
                Tok::Ident(first)
                    if !matches!(i.checked_sub(1).map(|p| &toks[p]), Some(Tok::Sym("::"))) =>
                {
                    let mut path = vec![first.clone()];
                    let mut j = i + 1;
                    while let (Some(Tok::Sym("::")), Some(Tok::Ident(next))) =
                        (toks.get(j), toks.get(j + 1))
                    {
                        path.push(next.clone());
                        j += 2;
                    }
                    if path.len() > 1 {
                        self.mods[cur].refs.push(path);
                    }
                    i = j;
                    continue;
                }
                Tok::Sym("{") => depth += 1,
                Tok::Sym("}") => {
                    if stack.len() > 1 && stack.last().is_some_and(|s| s.1 == depth) {
                        stack.pop();
                    }
                    depth = depth.saturating_sub(1);
                }
                _ => {}
            }
            i += 1;
        }
    }

    fn lookup(&self, m: usize, name: &str, depth: u32) -> Option<Target> {
        if let Some(&c) = self.mods[m].children.get(name) {
            return Some(Target::Module(c));
        }
        if let Some(path) = self.mods[m].aliases.get(name) {
            return self.resolve(m, path, depth + 1);
        }
        self.mods[m]
            .globs
            .iter()
            .find_map(|g| match self.resolve(m, g, depth + 1)? {
                Target::Module(gm) if gm != m && depth < 16 => self.lookup(gm, name, depth + 1),
                _ => None,
            })
    }

    /// Where `path`, written in module `m`, leads; `None` for another crate's path.
    fn resolve(&self, m: usize, path: &[String], depth: u32) -> Option<Target> {
        if depth > 16 {
            return None;
        }
        let (mut cur, mut rest) = match path.first()?.as_str() {
            "crate" | "$crate" => (0, &path[1..]),
            "self" => (m, &path[1..]),
            "super" => {
                let mut cur = m;
                let mut rest = path;
                while rest.first().is_some_and(|s| s == "super") {
                    cur = self.mods[cur].parent?;
                    rest = &rest[1..];
                }
                (cur, rest)
            }
            first => match self.lookup(m, first, depth)? {
                Target::Module(c) => (c, &path[1..]),
                item => return Some(item),
            },
        };
        while let Some((seg, tail)) = rest.split_first() {
            match self.lookup(cur, seg, depth) {
                Some(Target::Module(c)) => cur = c,
                Some(item) => return Some(item),
                None => return Some(Target::Item(cur)),
            }
            rest = tail;
        }
        Some(Target::Module(cur))
    }
}

enum Bind {
    Name(String),
    Glob,
}

/// Expands the use tree starting at `i` (after `use` or inside braces) under `prefix`; returns
/// the position after it (after the `;` at the top).
fn use_tree(
    toks: &[Tok],
    mut i: usize,
    prefix: Vec<String>,
    out: &mut Vec<(Vec<String>, Bind)>,
) -> usize {
    let mut path = prefix;
    loop {
        match toks.get(i) {
            Some(Tok::Sym("::")) => i += 1,
            Some(Tok::Ident(w)) if w != "as" => {
                path.push(w.clone());
                i += 1;
                if toks.get(i) != Some(&Tok::Sym("::")) {
                    break;
                }
            }
            Some(Tok::Sym("*")) => {
                out.push((path, Bind::Glob));
                return end_of_tree(toks, i + 1);
            }
            Some(Tok::Sym("{")) => {
                i += 1;
                while i < toks.len() && toks[i] != Tok::Sym("}") {
                    i = use_tree(toks, i, path.clone(), out);
                    if toks.get(i) == Some(&Tok::Sym(",")) {
                        i += 1;
                    }
                }
                return end_of_tree(toks, i + 1);
            }
            _ => break,
        }
    }
    if path.last().is_some_and(|s| s == "self") {
        path.pop();
    }
    let mut bind = path.last().cloned().unwrap_or_default();
    if let (Some(Tok::Ident(a)), Some(Tok::Ident(name))) = (toks.get(i), toks.get(i + 1))
        && a == "as"
    {
        bind = name.clone();
        i += 2;
    }
    out.push((path, Bind::Name(bind)));
    end_of_tree(toks, i)
}

/// Past a `;` ending a `use` (not past a `,` or `}` inside braces).
fn end_of_tree(toks: &[Tok], i: usize) -> usize {
    if toks.get(i) == Some(&Tok::Sym(";")) {
        i + 1
    } else {
        i
    }
}

/// Tarjan's strongly connected components of the graph `succ` (nodes `0..succ.len()`).
fn strongly_connected(succ: &[Vec<usize>]) -> Vec<Vec<usize>> {
    struct S<'a> {
        succ: &'a [Vec<usize>],
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        out: Vec<Vec<usize>>,
    }
    fn visit(s: &mut S<'_>, v: usize) {
        s.index[v] = Some(s.next);
        s.low[v] = s.next;
        s.next += 1;
        s.stack.push(v);
        s.on[v] = true;
        for &w in &s.succ[v] {
            match s.index[w] {
                None => {
                    visit(s, w);
                    s.low[v] = s.low[v].min(s.low[w]);
                }
                Some(iw) if s.on[w] => s.low[v] = s.low[v].min(iw),
                Some(_) => {}
            }
        }
        if Some(s.low[v]) == s.index[v] {
            let mut group = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on[w] = false;
                group.push(w);
                if w == v {
                    break;
                }
            }
            s.out.push(group);
        }
    }
    let n = succ.len();
    let mut s = S {
        succ,
        index: vec![None; n],
        low: vec![0; n],
        on: vec![false; n],
        stack: Vec::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in 0..n {
        if s.index[v].is_none() {
            visit(&mut s, v);
        }
    }
    s.out
}

/// A shortest cycle from `start` back to itself inside `members`.
fn cycle_through(start: usize, succ: &[Vec<usize>], members: &BTreeSet<usize>) -> Vec<usize> {
    let mut came_from: BTreeMap<usize, usize> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    while let Some(v) = queue.pop_front() {
        for &w in &succ[v] {
            if !members.contains(&w) {
                continue;
            }
            if w == start {
                let mut path = vec![v];
                let mut at = v;
                while at != start {
                    at = came_from[&at];
                    path.push(at);
                }
                path.reverse();
                path.push(start);
                return path;
            }
            if let std::collections::btree_map::Entry::Vacant(e) = came_from.entry(w) {
                e.insert(v);
                queue.push_back(w);
            }
        }
    }
    vec![start]
}
