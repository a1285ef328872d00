//! `render_changes`: a run of raw change events to Debezium's MongoDB records, the key
//! and the value's payload as JSON bytes, exactly as the Python path writes them for a
//! change outside any transaction.

use crate::bson::{fields, get, items, Value};
use crate::buffer::Buffer;
use crate::java::text_of;
use crate::rules::{apply_to_change, apply_to_document, apply_to_name, FieldRules, Paths};
use crate::text::{document, number, string, value, Mode};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};

/// What every record of a run shares.
struct Context<'a> {
    name: &'a str,
    version: &'a str,
    signal: (&'a str, &'a str),
    watched: Option<(&'a str, &'a str)>,
    now_ms: i64,
    blocks: bool,
    rules: Option<&'a FieldRules>, // field.exclude.list / field.renames, by collection
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

/// A document as its strict text in a JSON string (null when none), `paths` applied.
fn json_text(out: &mut Vec<u8>, doc: Option<&[u8]>, paths: Option<&Paths>) -> Option<()> {
    match doc {
        None => out.extend_from_slice(b"null"),
        Some(d) => {
            let mut text = Vec::with_capacity(d.len() + 32);
            document(&mut text, d, Mode::Strict, b",")?; // read whole first, as the Java driver does
            if let Some(paths) = paths {
                text.clear();
                document(&mut text, &apply_to_document(d, paths)?, Mode::Strict, b",")?;
            }
            string(out, &text);
        }
    }
    Some(())
}

fn field_str<'a>(doc: &'a [u8], name: &str) -> Option<Option<&'a str>> {
    match get(&fields(doc)?, name) {
        Some(found @ Value::Str(_)) => Some(Some(found.utf8()?)),
        _ => Some(None),
    }
}

/// An array's members (none when absent or null).
fn members_of(found: Option<Value>) -> Option<Vec<Value>> {
    match found {
        None | Some(Value::Null) => Some(Vec::new()),
        Some(Value::Array(array)) => items(array),
        _ => None,
    }
}

/// A removed field's or truncated array's name as the record has it, `paths` applied
/// (`Some(None)`: the rules remove it).
fn name_in_record(raw: &[u8], paths: Option<&Paths>) -> Option<Option<String>> {
    let name = text_of(raw).into_owned();
    match paths {
        None => Some(Some(name)),
        Some(paths) => apply_to_name(&name, paths),
    }
}

/// The `updateDescription` block: removed fields, updated fields as relaxed text with
/// `, ` between members, truncated arrays, `paths` applied; `None` when a part has an
/// unexpected type or a rule cannot be applied.
fn update_description(out: &mut Vec<u8>, described: &[u8], paths: Option<&Paths>) -> Option<()> {
    let parts = fields(described)?;
    let mut removed = Vec::new();
    for item in members_of(get(&parts, "removedFields"))? {
        let Value::Str(s) = item else { return None };
        removed.extend(name_in_record(s, paths)?);
    }
    let mut updated = Vec::with_capacity(64);
    match get(&parts, "updatedFields") {
        None | Some(Value::Null) => updated.extend_from_slice(b"{}"),
        Some(Value::Document(d)) => {
            document(&mut updated, d, Mode::Relaxed, b", ")?;
            if let Some(paths) = paths {
                updated.clear();
                document(
                    &mut updated,
                    &apply_to_change(d, paths)?,
                    Mode::Relaxed,
                    b", ",
                )?;
            }
        }
        _ => return None,
    }
    let mut truncated = Vec::new();
    for item in members_of(get(&parts, "truncatedArrays"))? {
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
        if let Some(name) = name_in_record(name, paths)? {
            truncated.push((name, size));
        }
    }
    out.extend_from_slice(b"{\"removedFields\":");
    if removed.is_empty() {
        out.extend_from_slice(b"null");
    } else {
        out.push(b'[');
        for (i, name) in removed.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            string(out, name.as_bytes());
        }
        out.push(b']');
    }
    out.extend_from_slice(b",\"updatedFields\":");
    string(out, &updated);
    out.extend_from_slice(b",\"truncatedArrays\":");
    if truncated.is_empty() {
        out.extend_from_slice(b"null");
    } else {
        out.push(b'[');
        for (i, (name, size)) in truncated.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(b"{\"field\":");
            string(out, name.as_bytes());
            out.extend_from_slice(b",\"size\":");
            number(out, *size);
            out.push(b'}');
        }
        out.push(b']');
    }
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
    let kind = get(&event, "operationType")?.utf8()?;
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
        [(name, data @ Value::Str(_))] if name == "_data" => data.utf8()?,
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
    // The collection's rules; one the Python side has not looked at yet goes its way.
    let paths = match ctx.rules {
        None => None,
        Some(rules) => Some(rules.get(db, coll)?).filter(|p| !p.is_empty()),
    };
    let wall = match get(&event, "wallTime") {
        None | Some(Value::Null) => None,
        Some(Value::Date(ms)) => Some(ms),
        _ => return None,
    };
    let full = opt_doc(get(&event, "fullDocument"))?;
    let pre = opt_doc(get(&event, "fullDocumentBeforeChange"))?;
    // The document's `_id` (null too: a collection may hold one document whose `_id` is
    // null): from `documentKey`, else from the document.
    let mut key_value = match get(&event, "documentKey") {
        None | Some(Value::Null) => None,
        Some(Value::Document(k)) => get(&fields(k)?, "_id"),
        _ => return None,
    };
    if key_value.is_none() {
        if let Some(doc) = full {
            key_value = get(&fields(doc)?, "_id");
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
    json_text(&mut p, if op == "c" { None } else { pre }, paths)?;
    p.extend_from_slice(b",\"after\":");
    json_text(&mut p, if op == "d" { None } else { full }, paths)?;
    p.extend_from_slice(b",\"updateDescription\":");
    match get(&event, "updateDescription") {
        Some(Value::Document(d)) if kind == "update" => update_description(&mut p, d, paths)?,
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

/// Renders `events[start:]` (each `bytes` or any buffer) until the first event left to
/// the Python path.
///
/// Returns the rendered events in runs of one collection each, in log order: `(db,
/// collection, rows, ts_ms, token, sec, inc, epoch)` with `rows` their `(op, key,
/// payload)`, and, for the run's last event, its source time, resume token (`_data`),
/// cluster time and epoch (the rank going back starts a new one, as `EventAssembler` has
/// it).
#[pyfunction]
#[pyo3(signature = (events, start, name, version, signal, watched, now_ns, epoch, last_rank, blocks, field_rules=None))]
#[allow(clippy::too_many_arguments)]
pub fn render_changes<'py>(
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
    field_rules: Option<PyRef<'py, FieldRules>>,
) -> PyResult<Bound<'py, PyList>> {
    let ctx = Context {
        name,
        version,
        signal: (signal.0.as_str(), signal.1.as_str()),
        watched: watched.as_ref().map(|(d, c)| (d.as_str(), c.as_str())),
        now_ms: now_ns.div_euclid(1_000_000),
        blocks,
        rules: field_rules.as_deref(),
    };
    let runs = PyList::empty(py);
    let mut rows = PyList::empty(py);
    let mut current: Option<(String, String, i64, String, u32, u32, i64)> = None;
    for index in start..events.len() {
        let item = events.get_item(index)?;
        let buffer = Buffer::of(&item)?;
        let Some((r, next_epoch, rank)) = row(buffer.bytes(), &ctx, epoch, last_rank) else {
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
