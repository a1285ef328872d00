//! The renderer as it was before every BSON type was rendered (`render`, `render_reply`),
//! kept under its old names for the Python code that still calls them until the change
//! that replaced it (`render_changes`, `render_find_reply` in `lib.rs`) is merged
//! everywhere: remove this module then. It leaves to the Python path every event holding
//! a value it does not know, as before.

mod bson;
mod text;

use bson::{elements, fields, get, Value};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString};
use text::{document, members, number, string, value, Mode};

/// What every record of a run shares.
struct Context<'a> {
    name: &'a str,
    version: &'a str,
    signal: (&'a str, &'a str),
    watched: Option<(&'a str, &'a str)>,
    now_ms: i64,
    blocks: bool,
}

/// One rendered event.
struct Row<'a> {
    db: &'a str,
    coll: &'a str,
    op: &'static str,
    key: Vec<u8>,
    payload: Vec<u8>,
    ts_ms: i64,
    token: &'a str,
    sec: u32,
    inc: u32,
}

fn opt_doc<'a>(v: Option<Value<'a>>) -> Option<Option<&'a [u8]>> {
    match v {
        None | Some(Value::Null) => Some(None),
        Some(Value::Document(d)) => Some(Some(d)),
        _ => None,
    }
}

fn json_text(out: &mut Vec<u8>, doc: Option<&[u8]>) -> Option<()> {
    match doc {
        None => out.extend_from_slice(b"null"),
        Some(d) => {
            let mut text = Vec::with_capacity(d.len() + 32);
            document(&mut text, d, Mode::Strict, b",")?;
            string(out, &text);
        }
    }
    Some(())
}

fn field_str<'a>(doc: &'a [u8], name: &str) -> Option<Option<&'a str>> {
    match get(&fields(doc)?, name) {
        Some(Value::Str(s)) => Some(Some(s)),
        _ => Some(None),
    }
}

/// A list as the Python path writes it: null when absent or empty, else `[a,b]` with each
/// item written by `item`.
fn list_or_null(
    out: &mut Vec<u8>,
    found: Option<Value>,
    mut item: impl FnMut(&mut Vec<u8>, Value) -> Option<()>,
) -> Option<()> {
    let items = match found {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => fields(items)?,
        _ => return None,
    };
    if items.is_empty() {
        out.extend_from_slice(b"null");
        return Some(());
    }
    out.push(b'[');
    for (i, (_, v)) in items.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        item(out, v)?;
    }
    out.push(b']');
    Some(())
}

/// The `updateDescription` block: removed fields, updated fields as relaxed text with
/// `, ` between members, truncated arrays; `None` when a part has an unexpected type.
fn update_description(out: &mut Vec<u8>, described: &[u8]) -> Option<()> {
    let parts = fields(described)?;
    out.extend_from_slice(b"{\"removedFields\":");
    list_or_null(out, get(&parts, "removedFields"), |out, item| {
        let Value::Str(s) = item else { return None };
        string(out, s.as_bytes());
        Some(())
    })?;
    out.extend_from_slice(b",\"updatedFields\":");
    let mut updated = Vec::with_capacity(64);
    match get(&parts, "updatedFields") {
        None | Some(Value::Null) => updated.extend_from_slice(b"{}"),
        Some(Value::Document(d)) => document(&mut updated, d, Mode::Relaxed, b", ")?,
        _ => return None,
    }
    string(out, &updated);
    out.extend_from_slice(b",\"truncatedArrays\":");
    list_or_null(out, get(&parts, "truncatedArrays"), |out, item| {
        let Value::Document(t) = item else {
            return None;
        };
        let t = fields(t)?;
        let Some(Value::Str(name)) = get(&t, "field") else {
            return None;
        };
        let size = match get(&t, "newSize") {
            Some(Value::Int32(n)) => n as i64,
            Some(Value::Int64(n)) => n,
            _ => return None,
        };
        out.extend_from_slice(b"{\"field\":");
        string(out, name.as_bytes());
        out.extend_from_slice(b",\"size\":");
        number(out, size);
        out.push(b'}');
        Some(())
    })?;
    out.push(b'}');
    Some(())
}

/// One change event and its epoch and rank, or `None` for the Python path.
fn row<'a>(
    raw: &'a [u8],
    ctx: &Context<'a>,
    epoch: i64,
    last_rank: u64,
) -> Option<(Row<'a>, i64, u64)> {
    let event = fields(raw)?;
    let Value::Str(kind) = get(&event, "operationType")? else {
        return None;
    };
    let op = match kind {
        "insert" => "c",
        "update" | "replace" => "u",
        "delete" => "d",
        _ => return None,
    };
    for name in ["lsid", "txnNumber"] {
        if !matches!(get(&event, name), None | Some(Value::Null)) {
            return None; // a transaction's event: BEGIN, END and their numbering are Python's
        }
    }
    let Value::Timestamp(sec, inc) = get(&event, "clusterTime")? else {
        return None;
    };
    let rank = (sec as u64) << 32 | inc as u64;
    let epoch = if rank < last_rank { epoch + 1 } else { epoch };
    let Value::Document(token) = get(&event, "_id")? else {
        return None;
    };
    let token_fields = fields(token)?;
    let token = match token_fields.as_slice() {
        [("_data", Value::Str(data))] => *data,
        _ => return None,
    };
    let (db, coll) = match get(&event, "ns") {
        Some(Value::Document(ns)) => match (field_str(ns, "db")?, field_str(ns, "coll")?) {
            (Some(db), Some(coll)) if !db.is_empty() && !coll.is_empty() => (db, coll),
            _ => ctx.watched?,
        },
        _ => ctx.watched?,
    };
    if (db, coll) == ctx.signal {
        return None;
    }
    let wall = match get(&event, "wallTime") {
        None | Some(Value::Null) => None,
        Some(Value::Date(ms)) => Some(ms),
        _ => return None,
    };
    let full = opt_doc(get(&event, "fullDocument"))?;
    let pre = opt_doc(get(&event, "fullDocumentBeforeChange"))?;
    let mut key_value = match get(&event, "documentKey") {
        None | Some(Value::Null) => None,
        Some(Value::Document(k)) => {
            // `documentKey` is read as a whole by pymongo: all of it must be readable.
            let members = fields(k)?;
            match get(&members, "_id") {
                None | Some(Value::Null) => None,
                found => found,
            }
        }
        _ => return None,
    };
    if key_value.is_none() {
        if let Some(doc) = full {
            key_value = match get(&fields(doc)?, "_id") {
                None | Some(Value::Null) => None,
                found => found,
            };
        }
    }
    let key_value = key_value?;
    let ts_ms = match wall {
        Some(ms) if ms != 0 => ms,
        _ if sec != 0 => sec as i64 * 1000,
        _ => ctx.now_ms,
    };

    let mut key = Vec::with_capacity(48);
    let mut id = Vec::with_capacity(32);
    value(&mut id, key_value, Mode::Relaxed, b",")?;
    key.extend_from_slice(b"{\"id\":");
    string(&mut key, &id);
    key.push(b'}');

    let mut p = Vec::with_capacity(raw.len() * 2 + 512);
    p.extend_from_slice(b"{\"before\":");
    json_text(&mut p, if op == "c" { None } else { pre })?;
    p.extend_from_slice(b",\"after\":");
    json_text(&mut p, if op == "d" { None } else { full })?;
    p.extend_from_slice(b",\"updateDescription\":");
    match get(&event, "updateDescription") {
        Some(Value::Document(d)) if kind == "update" => update_description(&mut p, d)?,
        None | Some(Value::Null) => p.extend_from_slice(b"null"),
        Some(Value::Document(d)) => {
            fields(d)?; // pymongo decodes it whole, whatever the kind
            p.extend_from_slice(b"null")
        }
        _ => {
            if kind == "update" {
                return None;
            }
            p.extend_from_slice(b"null")
        }
    }
    p.extend_from_slice(b",\"source\":{\"version\":");
    string(&mut p, ctx.version.as_bytes());
    p.extend_from_slice(b",\"connector\":\"mongodb\",\"name\":");
    string(&mut p, ctx.name.as_bytes());
    p.extend_from_slice(b",\"ts_ms\":");
    number(&mut p, ts_ms);
    p.extend_from_slice(b",\"snapshot\":\"false\",\"db\":");
    string(&mut p, db.as_bytes());
    p.extend_from_slice(b",\"sequence\":null,\"ts_us\":");
    number(&mut p, ts_ms as i128 * 1000);
    p.extend_from_slice(b",\"ts_ns\":");
    number(&mut p, ts_ms as i128 * 1_000_000);
    p.extend_from_slice(b",\"collection\":");
    string(&mut p, coll.as_bytes());
    p.extend_from_slice(b",\"ord\":");
    number(&mut p, inc);
    p.extend_from_slice(b",\"lsid\":null,\"txnNumber\":null,\"wallTime\":");
    match wall {
        Some(ms) => number(&mut p, ms),
        None => p.extend_from_slice(b"null"),
    }
    p.extend_from_slice(b"},\"op\":\"");
    p.extend_from_slice(op.as_bytes());
    p.extend_from_slice(b"\",\"ts_ms\":");
    number(&mut p, ctx.now_ms);
    p.extend_from_slice(b",\"transaction\":");
    if ctx.blocks {
        p.extend_from_slice(
            b"{\"id\":null,\"total_order\":1,\"data_collection_order\":1,\"transaction_epoch\":",
        );
        number(&mut p, epoch);
        p.extend_from_slice(b",\"transaction_rank\":");
        number(&mut p, rank);
        p.push(b'}');
    } else {
        p.extend_from_slice(b"null");
    }
    p.push(b'}');
    Some((
        Row {
            db,
            coll,
            op,
            key,
            payload: p,
            ts_ms,
            token,
            sec,
            inc,
        },
        epoch,
        rank,
    ))
}

/// Renders `events[start:]` until the first event left to the Python path.
///
/// Returns the rendered events in runs of one collection each, in log order: `(db,
/// collection, rows, ts_ms, token, sec, inc, epoch)` with `rows` their `(op, key,
/// payload)`, and, for the run's last event, its source time, resume token (`_data`),
/// cluster time and epoch (the rank going back starts a new one, as `EventAssembler` has
/// it).
#[pyfunction]
#[pyo3(signature = (events, start, name, version, signal, watched, now_ns, epoch, last_rank, blocks))]
#[allow(clippy::too_many_arguments)]
pub fn render<'py>(
    py: Python<'py>,
    events: &Bound<'py, PyList>,
    start: usize,
    name: &str,
    version: &str,
    signal: (String, String),
    watched: Option<(String, String)>,
    now_ns: i64,
    mut epoch: i64,
    mut last_rank: u64,
    blocks: bool,
) -> PyResult<Bound<'py, PyList>> {
    let ctx = Context {
        name,
        version,
        signal: (signal.0.as_str(), signal.1.as_str()),
        watched: watched.as_ref().map(|(d, c)| (d.as_str(), c.as_str())),
        now_ms: now_ns.div_euclid(1_000_000),
        blocks,
    };
    let runs = PyList::empty(py);
    let mut rows = PyList::empty(py);
    let mut current: Option<(String, String, i64, String, u32, u32, i64)> = None;
    for index in start..events.len() {
        let item = events.get_item(index)?;
        let raw: &[u8] = item.extract()?;
        let Some((r, next_epoch, rank)) = row(raw, &ctx, epoch, last_rank) else {
            break;
        };
        epoch = next_epoch;
        last_rank = rank;
        if let Some(run) = &current {
            if run.0 != r.db || run.1 != r.coll {
                let run = current.take().unwrap();
                runs.append((run.0, run.1, rows, run.2, run.3, run.4, run.5, run.6))?;
                rows = PyList::empty(py);
            }
        }
        rows.append((r.op, PyBytes::new(py, &r.key), PyBytes::new(py, &r.payload)))?;
        current = Some((
            r.db.to_string(),
            r.coll.to_string(),
            r.ts_ms,
            r.token.to_string(),
            r.sec,
            r.inc,
            epoch,
        ));
    }
    if let Some(run) = current {
        runs.append((run.0, run.1, rows, run.2, run.3, run.4, run.5, run.6))?;
    }
    Ok(runs)
}

/// The key's relaxed text and the document's strict text of one document.
fn document_texts(doc: &[u8]) -> Option<(String, String)> {
    let found = fields(doc)?;
    let id = match get(&found, "_id") {
        None | Some(Value::Null) => return None,
        Some(v) => v,
    };
    let mut key = Vec::with_capacity(32);
    value(&mut key, id, Mode::Relaxed, b",")?;
    let mut text = Vec::with_capacity(doc.len() * 2);
    members(&mut text, &found, Mode::Strict, b",")?;
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
#[pyfunction]
#[allow(clippy::type_complexity)]
pub fn render_reply<'py>(
    py: Python<'py>,
    reply: &[u8],
) -> PyResult<(
    Bound<'py, PyList>,
    Bound<'py, PyList>,
    Bound<'py, PyList>,
    i64,
)> {
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
        match document_texts(doc) {
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
