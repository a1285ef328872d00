//! `render_find_reply`: the documents of one raw `find` or `getMore` reply as a snapshot
//! window's `_id`s and documents in event form.

use crate::bson::{elements, fields, fields_checked, get, Value};
use crate::buffer::Buffer;
use crate::rules::{apply_to_document, paths_of, Paths};
use crate::text::{document, members, value, Mode};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString};

/// The key's relaxed text and the document's strict text of one document.
fn document_texts(doc: &[u8], paths: Option<&Paths>) -> Option<(String, String)> {
    let mut scratch = Vec::new();
    let found = fields_checked(doc, |replaced| {
        scratch.clear();
        value(&mut scratch, replaced, Mode::Strict, b",")
    })?;
    let id = get(&found, "_id")?; // (null is an `_id` too)
    let mut key = Vec::with_capacity(32);
    value(&mut key, id, Mode::Relaxed, b",")?;
    let mut text = Vec::with_capacity(doc.len() * 2);
    members(&mut text, &found, Mode::Strict, b",")?;
    if let Some(paths) = paths {
        text.clear();
        document(
            &mut text,
            &apply_to_document(doc, paths)?,
            Mode::Strict,
            b",",
        )?;
    }
    Some((String::from_utf8(key).ok()?, String::from_utf8(text).ok()?))
}

fn malformed(what: &str) -> PyErr {
    PyValueError::new_err(format!("a malformed find reply: {what}"))
}

/// The documents of one raw `find` or `getMore` reply in event form, with the cursor's
/// id (0 once the cursor is exhausted): `(ids, texts, left, cursor_id)`, the `_id`s as
/// relaxed Extended JSON and the documents as strict Extended JSON, as `ext_json.py`
/// writes them; a document not rendered here is None in both lists and `(index, its
/// bytes)` in `left`, for the Python path. The reply is read as it came off the wire:
/// pymongo's raw batches made an object of each document to join them back together.
/// `field_rules`: the collection's field.exclude.list / field.renames rules, applied to
/// the documents (not to the `_id`s, the records' keys).
#[pyfunction]
#[pyo3(signature = (reply, field_rules=None))]
#[allow(clippy::type_complexity)]
pub fn render_find_reply<'py>(
    py: Python<'py>,
    reply: &Bound<'py, PyAny>,
    field_rules: Option<Vec<(Vec<String>, Option<String>)>>,
) -> PyResult<(
    Bound<'py, PyList>,
    Bound<'py, PyList>,
    Bound<'py, PyList>,
    i64,
)> {
    let paths = field_rules.map(paths_of).filter(|p| !p.is_empty());
    let buffer = Buffer::of(reply)?;
    let reply = buffer.bytes();
    let top = fields(reply).ok_or_else(|| malformed("not a document of known types"))?;
    let Some(Value::Document(cursor)) = get(&top, "cursor") else {
        return Err(malformed("no cursor"));
    };
    let cursor = fields(cursor).ok_or_else(|| malformed("a cursor of unknown types"))?;
    let id = match get(&cursor, "id") {
        Some(Value::Int64(n)) => n,
        Some(Value::Int32(n)) => n as i64,
        _ => return Err(malformed("no cursor id")),
    };
    let Some(Value::Array(batch)) =
        get(&cursor, "firstBatch").or_else(|| get(&cursor, "nextBatch"))
    else {
        return Err(malformed("no batch"));
    };
    let mut docs = elements(batch).ok_or_else(|| malformed("a batch that is not an array"))?;
    let (ids, texts, left) = (PyList::empty(py), PyList::empty(py), PyList::empty(py));
    let mut index = 0usize;
    loop {
        let doc = match docs.next_element() {
            Some(None) => break,
            Some(Some((_, Value::Document(doc)))) => doc,
            _ => return Err(malformed("a batch member that is not a document")),
        };
        match document_texts(doc, paths.as_ref()) {
            Some((key, text)) => {
                ids.append(PyString::new(py, &key))?;
                texts.append(PyString::new(py, &text))?;
            }
            None => {
                ids.append(py.None())?;
                texts.append(py.None())?;
                left.append((index, PyBytes::new(py, doc)))?;
            }
        }
        index += 1;
    }
    Ok((ids, texts, left, id))
}
