//! Extended JSON as `bson_text.py` writes it (the MongoDB Java driver's strict and relaxed
//! modes in Debezium's compact layout, every BSON type), and JSON strings as orjson
//! escapes them: the Python path and this one must give the same bytes, and
//! `test_mongodb_transcoder.py` compares them on every type.

use crate::bson::{
    code_with_scope_parts, db_pointer_parts, fields_checked, items, regex_parts, Value,
};
use crate::java::{decimal128, text_of};
use crate::numbers::java_double;
pub use crate::numbers::number;

#[derive(Clone, Copy, PartialEq)]
pub enum Mode {
    Strict,
    Relaxed,
}

/// A JSON string as orjson writes it: `"`, `\` and control characters escaped, the rest
/// as UTF-8.
pub fn string(out: &mut Vec<u8>, text: &[u8]) {
    out.push(b'"');
    let mut start = 0;
    for (i, &c) in text.iter().enumerate() {
        let escape: &[u8] = match c {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0x08 => b"\\b",
            0x0c => b"\\f",
            0..=0x1f => b"",
            _ => continue,
        };
        out.extend_from_slice(&text[start..i]);
        if escape.is_empty() {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.extend_from_slice(b"\\u00");
            out.push(HEX[(c >> 4) as usize]);
            out.push(HEX[(c & 15) as usize]);
        } else {
            out.extend_from_slice(escape);
        }
        start = i + 1;
    }
    out.extend_from_slice(&text[start..]);
    out.push(b'"');
}

fn double(out: &mut Vec<u8>, x: f64, mode: Mode) {
    if x.is_finite() {
        return java_double(out, x);
    }
    let name: &[u8] = if x.is_nan() {
        b"NaN"
    } else if x > 0.0 {
        b"Infinity"
    } else {
        b"-Infinity"
    };
    if mode == Mode::Strict {
        out.extend_from_slice(name);
    } else {
        out.extend_from_slice(b"{\"$numberDouble\": \"");
        out.extend_from_slice(name);
        out.extend_from_slice(b"\"}");
    }
}

fn base64(out: &mut Vec<u8>, data: &[u8]) {
    const TABLE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for chunk in data.chunks(3) {
        let n = (chunk[0] as u32) << 16
            | (*chunk.get(1).unwrap_or(&0) as u32) << 8
            | *chunk.get(2).unwrap_or(&0) as u32;
        out.push(TABLE[(n >> 18) as usize & 63]);
        out.push(TABLE[(n >> 12) as usize & 63]);
        out.push(if chunk.len() > 1 {
            TABLE[(n >> 6) as usize & 63]
        } else {
            b'='
        });
        out.push(if chunk.len() > 2 {
            TABLE[n as usize & 63]
        } else {
            b'='
        });
    }
}

/// Java's ISO_OFFSET_DATE_TIME in UTC of a date from 1970 to 9999: no fraction when it is
/// 0, else its digits without trailing zeros.
fn iso(out: &mut Vec<u8>, millis: i64) {
    use std::io::Write;
    let days = millis.div_euclid(86_400_000);
    let in_day = millis.rem_euclid(86_400_000);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + if month <= 2 { 1 } else { 0 };
    let secs = in_day / 1000;
    let _ = write!(
        out,
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    );
    let fraction = in_day % 1000;
    if fraction != 0 {
        let text = format!("{fraction:03}");
        out.push(b'.');
        out.extend_from_slice(text.trim_end_matches('0').as_bytes());
    }
    out.push(b'Z');
}

const HEX: &[u8; 16] = b"0123456789abcdef";
const HEX_UPPER: &[u8; 16] = b"0123456789ABCDEF";
/// The last millisecond of year 9999: relaxed mode writes dates from 1970 to it as text.
const LAST_MS_OF_9999: i64 = 253_402_300_799_999;

/// A BSON string's or name's bytes as a JSON string, decoded as the Java driver decodes
/// them (text that is not UTF-8 as the JDK replaces it).
pub fn java_string(out: &mut Vec<u8>, raw: &[u8]) {
    match std::str::from_utf8(raw) {
        Ok(_) => string(out, raw),
        Err(_) => string(out, text_of(raw).as_bytes()),
    }
}

fn oid(out: &mut Vec<u8>, oid: &[u8]) {
    out.extend_from_slice(b"{\"$oid\": \"");
    for &c in oid {
        out.push(HEX[(c >> 4) as usize]);
        out.push(HEX[(c & 15) as usize]);
    }
    out.extend_from_slice(b"\"}");
}

/// One value as Extended JSON (`sep` between members). `None`: something inside is
/// malformed (the caller takes the Python path, which decides what to do with it).
pub fn value(out: &mut Vec<u8>, v: Value, mode: Mode, sep: &[u8]) -> Option<()> {
    match v {
        Value::Double(x) => double(out, x, mode),
        Value::Str(s) => java_string(out, s),
        Value::Document(doc) => document(out, doc, mode, sep)?,
        Value::Array(doc) => {
            out.push(b'[');
            for (i, item) in items(doc)?.into_iter().enumerate() {
                if i > 0 {
                    out.extend_from_slice(sep);
                }
                value(out, item, mode, sep)?;
            }
            out.push(b']');
        }
        Value::Binary(subtype, data) => {
            let kind = [
                HEX_UPPER[(subtype >> 4) as usize],
                HEX_UPPER[(subtype & 15) as usize],
            ];
            if mode == Mode::Strict {
                out.extend_from_slice(b"{\"$binary\": \"");
                base64(out, data);
                out.push(b'"');
                out.extend_from_slice(sep);
                out.extend_from_slice(b"\"$type\": \"");
            } else {
                out.extend_from_slice(b"{\"$binary\": {\"base64\": \"");
                base64(out, data);
                out.push(b'"');
                out.extend_from_slice(sep);
                out.extend_from_slice(b"\"subType\": \"");
            }
            out.extend_from_slice(&kind);
            out.extend_from_slice(if mode == Mode::Strict {
                b"\"}"
            } else {
                b"\"}}"
            });
        }
        Value::ObjectId(id) => oid(out, id),
        Value::Bool(b) => out.extend_from_slice(if b { b"true" } else { b"false" }),
        Value::Date(ms) => {
            if mode == Mode::Strict {
                out.extend_from_slice(b"{\"$date\": ");
                number(out, ms);
                out.push(b'}');
            } else if (0..=LAST_MS_OF_9999).contains(&ms) {
                out.extend_from_slice(b"{\"$date\": \"");
                iso(out, ms);
                out.extend_from_slice(b"\"}");
            } else {
                out.extend_from_slice(b"{\"$date\": {\"$numberLong\": \"");
                number(out, ms);
                out.extend_from_slice(b"\"}}");
            }
        }
        Value::Null => out.extend_from_slice(b"null"),
        Value::Int32(n) => number(out, n),
        Value::Int64(n) => {
            if mode == Mode::Strict {
                out.extend_from_slice(b"{\"$numberLong\": \"");
                number(out, n);
                out.extend_from_slice(b"\"}");
            } else {
                number(out, n);
            }
        }
        Value::Timestamp(t, i) => {
            out.extend_from_slice(b"{\"$timestamp\": {\"t\": ");
            number(out, t);
            out.extend_from_slice(sep);
            out.extend_from_slice(b"\"i\": ");
            number(out, i);
            out.extend_from_slice(b"}}");
        }
        Value::Decimal128(bytes) => {
            out.extend_from_slice(b"{\"$numberDecimal\": \"");
            decimal128(out, bytes);
            out.extend_from_slice(b"\"}");
        }
        Value::Regex(whole) => {
            let (pattern, options) = regex_parts(whole);
            // `BsonRegularExpression` keeps its options sorted.
            let mut sorted: Vec<char> = text_of(options).chars().collect();
            sorted.sort_unstable();
            let sorted: String = sorted.into_iter().collect();
            if mode == Mode::Strict {
                out.extend_from_slice(b"{\"$regex\": ");
                java_string(out, pattern);
                out.extend_from_slice(sep);
                out.extend_from_slice(b"\"$options\": ");
                string(out, sorted.as_bytes());
                out.push(b'}');
            } else {
                out.extend_from_slice(b"{\"$regularExpression\": {\"pattern\": ");
                java_string(out, pattern);
                out.extend_from_slice(sep);
                out.extend_from_slice(b"\"options\": ");
                string(out, sorted.as_bytes());
                out.extend_from_slice(b"}}");
            }
        }
        Value::DbPointer(whole) => {
            let (namespace, id) = db_pointer_parts(whole);
            out.extend_from_slice(b"{\"$ref\": ");
            java_string(out, namespace);
            out.extend_from_slice(sep);
            out.extend_from_slice(b"\"$id\": ");
            oid(out, id);
            out.push(b'}');
        }
        Value::Code(code) => {
            out.extend_from_slice(b"{\"$code\": ");
            java_string(out, code);
            out.push(b'}');
        }
        Value::Symbol(symbol) => {
            out.extend_from_slice(b"{\"$symbol\": ");
            java_string(out, symbol);
            out.push(b'}');
        }
        Value::CodeWithScope(whole) => {
            let (code, scope) = code_with_scope_parts(whole);
            out.extend_from_slice(b"{\"$code\": ");
            java_string(out, code);
            out.extend_from_slice(sep);
            out.extend_from_slice(b"\"$scope\": ");
            document(out, scope, mode, sep)?;
            out.push(b'}');
        }
        Value::Undefined => out.extend_from_slice(b"{\"$undefined\": true}"),
        Value::MinKey => out.extend_from_slice(b"{\"$minKey\": 1}"),
        Value::MaxKey => out.extend_from_slice(b"{\"$maxKey\": 1}"),
    }
    Some(())
}

/// A document's members in stored order, a repeated name at its first place with its
/// last value (the replaced values are read too: a malformed one fails the document, as
/// it fails the Java driver's decoding).
pub fn document(out: &mut Vec<u8>, doc: &[u8], mode: Mode, sep: &[u8]) -> Option<()> {
    let mut scratch = Vec::new();
    let found = fields_checked(doc, |replaced| {
        scratch.clear();
        value(&mut scratch, replaced, mode, sep)
    })?;
    members(out, &found, mode, sep)
}

/// A document given as its members (`fields`), which a caller that looked into them
/// already has: `document`.
pub fn members<S: AsRef<str>>(
    out: &mut Vec<u8>,
    members: &[(S, Value)],
    mode: Mode,
    sep: &[u8],
) -> Option<()> {
    out.push(b'{');
    for (i, (name, item)) in members.iter().enumerate() {
        if i > 0 {
            out.extend_from_slice(sep);
        }
        string(out, name.as_ref().as_bytes());
        out.extend_from_slice(b": ");
        value(out, *item, mode, sep)?;
    }
    out.push(b'}');
    Some(())
}
