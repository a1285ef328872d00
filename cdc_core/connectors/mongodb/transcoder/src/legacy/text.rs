//! Extended JSON as `ext_json.py` writes it (the MongoDB Java driver's strict and relaxed
//! modes in Debezium's compact layout), and JSON strings as orjson escapes them: the
//! Python path and this one must give the same bytes, and `test_mongodb_transcoder.py`
//! compares them on every type.

use super::bson::{fields, Value};

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

/// An integer in decimal, as `Display` writes it, without the formatting machinery: most
/// values of a document and of a record's source block are numbers, and `write!` cost
/// several times their digits.
pub fn number(out: &mut Vec<u8>, n: impl Into<i128>) {
    let n: i128 = n.into();
    let Ok(small) = i64::try_from(n) else {
        use std::io::Write;
        let _ = write!(out, "{n}");
        return;
    };
    if small < 0 {
        out.push(b'-');
    }
    let mut left = small.unsigned_abs();
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (left % 10) as u8;
        left /= 10;
        if left == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
}

/// Java's `Double.toString` of a finite double: its shortest digits, plain from 10^-3 to
/// below 10^7, else `d.dddE<n>`.
pub fn java_double(out: &mut Vec<u8>, x: f64) {
    if x == 0.0 {
        out.extend_from_slice(if x.is_sign_negative() {
            b"-0.0"
        } else {
            b"0.0"
        });
        return;
    }
    let (digits, point) = shortest(x.abs());
    let digits = digits.as_bytes();
    if x < 0.0 {
        out.push(b'-');
    }
    let magnitude = x.abs();
    if (1e-3..1e7).contains(&magnitude) {
        if point >= 0 {
            let whole = (point + 1) as usize;
            if digits.len() > whole {
                out.extend_from_slice(&digits[..whole]);
                out.push(b'.');
                out.extend_from_slice(&digits[whole..]);
            } else {
                out.extend_from_slice(digits);
                out.extend(std::iter::repeat_n(b'0', whole - digits.len()));
                out.extend_from_slice(b".0");
            }
        } else {
            out.extend_from_slice(b"0.");
            out.extend(std::iter::repeat_n(b'0', (-point - 1) as usize));
            out.extend_from_slice(digits);
        }
        return;
    }
    out.push(digits[0]);
    out.push(b'.');
    if digits.len() > 1 {
        out.extend_from_slice(&digits[1..]);
    } else {
        out.push(b'0');
    }
    out.push(b'E');
    number(out, point);
}

/// Decimal digits on the stack: a double's shortest digits, or the 61 of its expansion
/// that `shortest` looks at (a heap string per double cost as much as the rest of a
/// document's members).
struct Digits {
    buf: [u8; 72],
    len: usize,
}

impl Digits {
    /// The digits of `text` but its point (as many as fit).
    fn of(text: &[u8]) -> Self {
        let mut digits = Digits {
            buf: [0; 72],
            len: 0,
        };
        for &c in text.iter().filter(|c| **c != b'.') {
            if digits.len < digits.buf.len() {
                digits.buf[digits.len] = c;
                digits.len += 1;
            }
        }
        digits
    }

    fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    /// Trailing zeros dropped (a shortest string has none but "0").
    fn trimmed(mut self) -> Self {
        while self.len > 1 && self.buf[self.len - 1] == b'0' {
            self.len -= 1;
        }
        self
    }
}

/// `x` written by `{:e}` (`{:.60e}` when `exact`) on the stack: its digits, the point
/// dropped, and the power of ten of the first one.
fn scientific(x: f64, exact: bool) -> (Digits, i32) {
    use std::io::Write;
    let mut text = [0u8; 96];
    let mut rest = &mut text[..];
    let _ = if exact {
        write!(rest, "{x:.60e}")
    } else {
        write!(rest, "{x:e}")
    };
    let written = 96 - rest.len();
    let text = &text[..written];
    let (mantissa, exp) = match text.iter().position(|&c| c == b'e') {
        Some(at) => (&text[..at], &text[at + 1..]),
        None => (text, &b"0"[..]),
    };
    let digits = Digits::of(mantissa);
    let point = std::str::from_utf8(exp)
        .ok()
        .and_then(|e| e.parse().ok())
        .unwrap_or(0);
    (digits, point)
}

/// The shortest digits that read back as `x` (> 0), and where the point goes. Of two
/// such digit strings equally close to `x`, Java and Python take the one ending in an
/// even digit, where Rust's `{:e}` may take the other: `x` exactly halfway is found in
/// its exact expansion.
fn shortest(x: f64) -> (Digits, i32) {
    let (digits, point) = scientific(x, false);
    let digits = digits.trimmed();
    let n = digits.len;
    if n < 16 {
        return (digits, point); // no two such strings of fewer than 16 digits fit one double
    }
    let (exact, exact_point) = scientific(x, true);
    let tail = &exact.as_bytes()[n..];
    if exact_point != point || tail[0] != b'5' || tail[1..].iter().any(|c| *c != b'0') {
        return (digits, point);
    }
    let mut low = Digits::of(&exact.as_bytes()[..n]);
    if low.buf[n - 1].is_multiple_of(2) {
        return (low.trimmed(), point);
    }
    let mut at = n;
    while at > 0 {
        at -= 1;
        if low.buf[at] == b'9' {
            low.buf[at] = b'0';
        } else {
            low.buf[at] += 1;
            return (low.trimmed(), point);
        }
    }
    (Digits::of(b"1"), point + 1)
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

/// One value as Extended JSON (`sep` between members). `None`: something inside has no
/// form here (the caller takes the Python path).
pub fn value(out: &mut Vec<u8>, v: Value, mode: Mode, sep: &[u8]) -> Option<()> {
    match v {
        Value::Double(x) => double(out, x, mode),
        Value::Str(s) => string(out, s.as_bytes()),
        Value::Document(doc) => document(out, doc, mode, sep)?,
        Value::Array(doc) => {
            out.push(b'[');
            for (i, (_, item)) in fields(doc)?.into_iter().enumerate() {
                if i > 0 {
                    out.extend_from_slice(sep);
                }
                value(out, item, mode, sep)?;
            }
            out.push(b']');
        }
        Value::Binary(subtype, data) => {
            let kind = [HEX[(subtype >> 4) as usize], HEX[(subtype & 15) as usize]];
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
        Value::ObjectId(oid) => {
            out.extend_from_slice(b"{\"$oid\": \"");
            for &c in oid {
                out.push(HEX[(c >> 4) as usize]);
                out.push(HEX[(c & 15) as usize]);
            }
            out.extend_from_slice(b"\"}");
        }
        Value::Bool(b) => out.extend_from_slice(if b { b"true" } else { b"false" }),
        Value::Date(ms) => {
            if mode == Mode::Strict {
                out.extend_from_slice(b"{\"$date\": ");
                number(out, ms);
                out.push(b'}');
            } else if (0..253_402_300_800_000).contains(&ms) {
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
        Value::MinKey => out.extend_from_slice(b"{\"$minKey\": 1}"),
        Value::MaxKey => out.extend_from_slice(b"{\"$maxKey\": 1}"),
    }
    Some(())
}

/// A document's members in order. pymongo turns a document holding `$ref` into a DBRef,
/// whose text the Python path writes in its own order: not followed here.
pub fn document(out: &mut Vec<u8>, doc: &[u8], mode: Mode, sep: &[u8]) -> Option<()> {
    members(out, &fields(doc)?, mode, sep)
}

/// A document given as its members (`fields`), which a caller that looked into them
/// already has: `document`.
pub fn members(out: &mut Vec<u8>, members: &[(&str, Value)], mode: Mode, sep: &[u8]) -> Option<()> {
    out.push(b'{');
    for (i, &(name, item)) in members.iter().enumerate() {
        if name == "$ref" {
            return None;
        }
        if i > 0 {
            out.extend_from_slice(sep);
        }
        string(out, name.as_bytes());
        out.extend_from_slice(b": ");
        value(out, item, mode, sep)?;
    }
    out.push(b'}');
    Some(())
}
