//! Change events from raw BSON straight to Debezium's MongoDB records: the key and the
//! value's payload as JSON bytes, exactly as the Python path (`events.py`, `shape.py`,
//! `ext_json.py` and the dispatcher) writes them for a change outside any transaction.
//!
//! `render_changes` (`changes.rs`) goes through a run of raw change events and stops at the
//! first one it does not render: a multi-document transaction's event, the signal
//! collection's, a drop or any other kind, malformed BSON. `render_find_reply`
//! (`replies.rs`) renders a snapshot window's `find` replies. Every value MongoDB stores is
//! rendered as the Java driver writes it (`bson.rs`, `text.rs`, `numbers.rs`, `java.rs`),
//! as the Python path does (`bson_text.py`); `rules.rs` applies `field.exclude.list` and
//! `field.renames`. The Python path takes the event `render_changes` stops at, so what is
//! rendered here is only ever what the Python path would have written.

mod bson;
mod buffer;
mod changes;
mod java;
mod numbers;
mod replies;
mod rules;
mod text;

use pyo3::prelude::*;
use rules::FieldRules;

#[pymodule]
fn tidemark_mongodb_transcoder(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<FieldRules>()?;
    m.add_function(wrap_pyfunction!(changes::render_changes, m)?)?;
    m.add_function(wrap_pyfunction!(replies::render_find_reply, m)?)?;
    Ok(())
}
