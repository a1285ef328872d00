//! `field.exclude.list` and `field.renames` as Debezium's MongoDB connector applies them
//! (`FieldSelector`), the rules of each collection given by the Python side, which
//! matches namespaces (`field_rules.py` has the same steps, and their reasons). A
//! document is read into ordered members, the rules applied, and written back as BSON,
//! which is then rendered as any other document. `None`: a rule cannot be applied (a
//! rename onto a name the document has, a name with an empty part): the Python path
//! takes the event and applies `event.processing.failure.handling.mode`.

use std::collections::HashMap;

use pyo3::prelude::*;

use crate::bson::{elements, name_of};

/// One rule: a field's path, and its new last node (`None`: exclude it).
#[derive(Clone)]
pub struct Path {
    nodes: Vec<String>,
    new_name: Option<String>,
}

pub type Paths = Vec<Path>;

pub fn paths_of(given: Vec<(Vec<String>, Option<String>)>) -> Paths {
    given
        .into_iter()
        .map(|(nodes, new_name)| Path { nodes, new_name })
        .collect()
}

/// The rules of each collection the Python side has looked at; a collection it has not
/// (`get` is `None`) goes the Python way, which then adds it.
#[pyclass(module = "tidemark_mongodb_transcoder")]
#[derive(Default)]
pub struct FieldRules {
    by_collection: HashMap<(String, String), Paths>,
}

#[pymethods]
impl FieldRules {
    #[new]
    fn new() -> Self {
        FieldRules::default()
    }

    /// The rules of collection `db.coll`, in order (`(nodes, new name or None)`).
    fn add(&mut self, db: String, coll: String, paths: Vec<(Vec<String>, Option<String>)>) {
        self.by_collection.insert((db, coll), paths_of(paths));
    }

    fn __contains__(&self, namespace: (String, String)) -> bool {
        self.by_collection.contains_key(&namespace)
    }
}

impl FieldRules {
    pub fn get(&self, db: &str, coll: &str) -> Option<&Paths> {
        self.by_collection.get(&(db.to_string(), coll.to_string()))
    }
}

/// A member's value: a document, an array, or any other value as its type and bytes.
enum Node<'a> {
    Doc(Vec<(String, Node<'a>)>),
    Arr(Vec<Node<'a>>),
    Leaf(u8, &'a [u8]),
}

/// A document's members in order, a repeated name at its first place with its last value.
fn tree(doc: &[u8]) -> Option<Vec<(String, Node<'_>)>> {
    let mut it = elements(doc)?;
    let mut out: Vec<(String, Node)> = Vec::new();
    while let Some((raw, _)) = it.next_element()? {
        let node = node(it.last_raw())?;
        let name = name_of(raw).into_owned();
        match out.iter().position(|(n, _)| *n == name) {
            Some(place) => out[place].1 = node,
            None => out.push((name, node)),
        }
    }
    Some(out)
}

fn node((kind, data): (u8, &[u8])) -> Option<Node<'_>> {
    Some(match kind {
        0x03 => Node::Doc(tree(data)?),
        0x04 => {
            let mut it = elements(data)?;
            let mut items = Vec::new();
            while it.next_element()?.is_some() {
                items.push(node(it.last_raw())?);
            }
            Node::Arr(items)
        }
        _ => Node::Leaf(kind, data),
    })
}

fn encode(members: &[(String, Node)], out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(&[0; 4]);
    for (name, node) in members {
        element(name, node, out);
    }
    out.push(0);
    let len = (out.len() - start) as i32;
    out[start..start + 4].copy_from_slice(&len.to_le_bytes());
}

fn element(name: &str, node: &Node, out: &mut Vec<u8>) {
    let kind = match node {
        Node::Doc(_) => 0x03,
        Node::Arr(_) => 0x04,
        Node::Leaf(kind, _) => *kind,
    };
    out.push(kind);
    out.extend_from_slice(name.as_bytes());
    out.push(0);
    match node {
        Node::Doc(members) => encode(members, out),
        Node::Arr(items) => {
            let start = out.len();
            out.extend_from_slice(&[0; 4]);
            for (i, item) in items.iter().enumerate() {
                element(&i.to_string(), item, out);
            }
            out.push(0);
            let len = (out.len() - start) as i32;
            out[start..start + 4].copy_from_slice(&len.to_le_bytes());
        }
        Node::Leaf(_, data) => out.extend_from_slice(data),
    }
}

fn numeric(node: &str) -> bool {
    !node.is_empty() && node.bytes().all(|c| c.is_ascii_digit())
}

/// The nodes without array indexes; unchanged where two indexes follow each other.
fn without_indexes(nodes: &[String]) -> Vec<String> {
    if nodes.len() <= 1 {
        return nodes.to_vec();
    }
    let mut kept: Option<Vec<String>> = None;
    let (mut previous, mut offset) = (false, 0);
    for (i, node) in nodes.iter().enumerate() {
        if numeric(node) {
            if previous {
                return nodes.to_vec();
            }
            previous = true;
            kept.get_or_insert_with(|| nodes.to_vec())
                .remove(i - offset);
            offset += 1;
        } else {
            previous = false;
        }
    }
    kept.unwrap_or_else(|| nodes.to_vec())
}

fn starts_with(begin: &[String], source: &[String]) -> bool {
    begin.len() <= source.len() && begin.iter().zip(source).all(|(a, b)| a == b)
}

/// Java's `Pattern.split`: trailing empty parts dropped, the text itself without a dot.
fn java_split(text: &str) -> Vec<String> {
    if !text.contains('.') {
        return vec![text.to_string()];
    }
    let mut parts: Vec<String> = text.split('.').map(str::to_string).collect();
    while parts.last().is_some_and(|p| p.is_empty()) {
        parts.pop();
    }
    parts
}

fn java_trim(text: &str) -> &str {
    text.trim_matches(|c: char| c <= ' ')
}

/// A dotted name's nodes (`None`: none, or an empty one).
fn parts_of(name: &str) -> Option<Vec<String>> {
    let nodes = java_split(java_trim(name));
    if nodes.is_empty() || nodes.iter().any(|n| n.is_empty()) {
        return None;
    }
    Some(nodes)
}

impl Path {
    fn renamed(&self, nodes: &[String]) -> String {
        let last = self.nodes.len() - 1;
        let new_name = self.new_name.as_deref().unwrap_or_default();
        let mut i = 0;
        let out: Vec<&str> = nodes
            .iter()
            .map(|node| {
                if numeric(node) {
                    node.as_str()
                } else {
                    let this = if i == last { new_name } else { node.as_str() };
                    i += 1;
                    this
                }
            })
            .collect();
        out.join(".")
    }

    /// Remove `name`, or rename it to `new_name`, at the end of the document.
    fn at(&self, doc: &mut Vec<(String, Node)>, name: &str, new_name: &str) -> Option<()> {
        let Some(place) = doc.iter().position(|(n, _)| n == name) else {
            return Some(());
        };
        if self.new_name.is_none() {
            doc.remove(place);
            return Some(());
        }
        if doc.iter().any(|(n, _)| n == new_name) {
            return None; // the document already has it: Debezium throws
        }
        let (_, value) = doc.remove(place);
        doc.push((new_name.to_string(), value));
        Some(())
    }

    fn apply(&self, doc: &mut Vec<(String, Node)>, begin: usize) -> Option<()> {
        let last = self.nodes.len() - 1;
        let name = &self.nodes[begin];
        if begin == last {
            let new_name = self.new_name.clone().unwrap_or_else(|| name.clone());
            return self.at(doc, name, &new_name);
        }
        match doc.iter_mut().find(|(n, _)| n == name).map(|(_, v)| v) {
            Some(Node::Doc(inner)) => self.apply(inner, begin + 1),
            Some(found) => self.within_list(found, begin + 1),
            None => Some(()),
        }
    }

    fn within_list(&self, value: &mut Node, begin: usize) -> Option<()> {
        if let Node::Arr(items) = value {
            for item in items {
                if let Node::Doc(inner) = item {
                    self.apply(inner, begin)?;
                }
            }
        }
        Some(())
    }

    fn apply_change(&self, doc: &mut Vec<(String, Node)>) -> Option<()> {
        let field = self.nodes.join(".");
        if doc.iter().any(|(n, _)| *n == field) {
            let new_field = match &self.new_name {
                None => field.clone(),
                Some(new_name) => {
                    let mut nodes = self.nodes[..self.nodes.len() - 1].to_vec();
                    nodes.push(new_name.clone());
                    nodes.join(".")
                }
            };
            return self.at(doc, &field, &new_field);
        }
        let mut moved: Vec<(String, Node)> = Vec::new();
        let mut i = 0;
        while i < doc.len() {
            let origin = java_split(&doc[i].0);
            let key_nodes = without_indexes(&origin);
            let len = self.nodes.len();
            if (key_nodes.len() > len && starts_with(&self.nodes, &key_nodes))
                || (key_nodes.len() == len && key_nodes == self.nodes)
            {
                let (_, value) = doc.remove(i);
                if self.new_name.is_some() {
                    moved.push((self.renamed(&origin), value));
                }
                continue;
            }
            if key_nodes.len() < len && starts_with(&key_nodes, &self.nodes) {
                match &mut doc[i].1 {
                    Node::Doc(inner) => self.apply(inner, key_nodes.len())?,
                    other => self.within_list(other, key_nodes.len())?,
                }
                break;
            }
            i += 1;
        }
        for (name, value) in moved {
            if doc.iter().any(|(n, _)| *n == name) {
                return None;
            }
            doc.push((name, value));
        }
        Some(())
    }

    fn matches_name(&self, name: &str) -> Option<bool> {
        Some(starts_with(&without_indexes(&parts_of(name)?), &self.nodes))
    }
}

/// A document (its BSON) with `paths` applied, as BSON.
pub fn apply_to_document(doc: &[u8], paths: &Paths) -> Option<Vec<u8>> {
    let mut members = tree(doc)?;
    for path in paths {
        path.apply(&mut members, 0)?;
    }
    let mut out = Vec::with_capacity(doc.len());
    encode(&members, &mut out);
    Some(out)
}

/// `updatedFields` (its BSON) with `paths` applied, as BSON.
pub fn apply_to_change(doc: &[u8], paths: &Paths) -> Option<Vec<u8>> {
    let mut members = tree(doc)?;
    for path in paths {
        path.apply_change(&mut members)?;
    }
    let mut out = Vec::with_capacity(doc.len());
    encode(&members, &mut out);
    Some(out)
}

/// A removed field's or truncated array's name: `Some(None)` removed, `Some(Some(new))`.
pub fn apply_to_name(name: &str, paths: &Paths) -> Option<Option<String>> {
    for path in paths {
        if path.matches_name(name)? {
            return match path.new_name {
                None => Some(None),
                Some(_) => Some(Some(path.renamed(&parts_of(name)?))),
            };
        }
    }
    Some(Some(name.to_string()))
}
