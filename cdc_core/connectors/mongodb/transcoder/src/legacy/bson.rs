//! A BSON reader for change events: the element types documents are made of, and nothing
//! else. Anything it does not know (Decimal128, regular expressions, code, the deprecated
//! types, binary subtype 2) or finds malformed is `None`: the caller hands that event to
//! the Python path, which decodes it with pymongo and renders it the long way.

#[derive(Clone, Copy)]
pub enum Value<'a> {
    Double(f64),
    Str(&'a str),
    Document(&'a [u8]),
    Array(&'a [u8]),
    Binary(u8, &'a [u8]),
    ObjectId(&'a [u8]),
    Bool(bool),
    Date(i64),
    Null,
    Int32(i32),
    Timestamp(u32, u32), // (time, increment)
    Int64(i64),
    MinKey,
    MaxKey,
}

/// pymongo decodes dates into `datetime`s: years 1 to 9999 only (it raises outside them).
pub const MIN_DATE_MS: i64 = -62_135_596_800_000;
pub const MAX_DATE_MS: i64 = 253_402_300_799_999;

pub fn le_i32(b: &[u8], at: usize) -> Option<i32> {
    Some(i32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn le_i64(b: &[u8], at: usize) -> Option<i64> {
    Some(i64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// The elements of one document (its whole bytes: length, elements, trailing 0).
pub struct Elements<'a> {
    b: &'a [u8],
    at: usize,
}

pub fn elements(doc: &[u8]) -> Option<Elements<'_>> {
    let len = le_i32(doc, 0)?;
    if len < 5 || len as usize != doc.len() || doc[doc.len() - 1] != 0 {
        return None;
    }
    Some(Elements { b: doc, at: 4 })
}

impl<'a> Elements<'a> {
    /// The next (name, value); `Some(None)` at the end; `None` when malformed or unknown.
    pub fn next_element(&mut self) -> Option<Option<(&'a str, Value<'a>)>> {
        let b = self.b;
        let kind = *b.get(self.at)?;
        if kind == 0 {
            return if self.at == b.len() - 1 {
                Some(None)
            } else {
                None
            };
        }
        let name_start = self.at + 1;
        let name_len = b.get(name_start..)?.iter().position(|&c| c == 0)?;
        let name = std::str::from_utf8(&b[name_start..name_start + name_len]).ok()?;
        let mut at = name_start + name_len + 1;
        let value = match kind {
            0x01 => {
                let v = f64::from_bits(le_i64(b, at)? as u64);
                at += 8;
                Value::Double(v)
            }
            0x02 => {
                let len = le_i32(b, at)?;
                if len < 1 {
                    return None;
                }
                let start = at + 4;
                let end = start + len as usize;
                if *b.get(end - 1)? != 0 {
                    return None;
                }
                let text = std::str::from_utf8(b.get(start..end - 1)?).ok()?;
                at = end;
                Value::Str(text)
            }
            0x03 | 0x04 => {
                let len = le_i32(b, at)?;
                if len < 5 {
                    return None;
                }
                let doc = b.get(at..at + len as usize)?;
                at += len as usize;
                if kind == 0x03 {
                    Value::Document(doc)
                } else {
                    Value::Array(doc)
                }
            }
            0x05 => {
                let len = le_i32(b, at)?;
                if len < 0 {
                    return None;
                }
                let subtype = *b.get(at + 4)?;
                if subtype == 2 {
                    return None; // the old binary form: pymongo strips its inner length
                }
                let data = b.get(at + 5..at + 5 + len as usize)?;
                at += 5 + len as usize;
                Value::Binary(subtype, data)
            }
            0x07 => {
                let oid = b.get(at..at + 12)?;
                at += 12;
                Value::ObjectId(oid)
            }
            0x08 => {
                let v = *b.get(at)?;
                at += 1;
                match v {
                    0 => Value::Bool(false),
                    1 => Value::Bool(true),
                    _ => return None,
                }
            }
            0x09 => {
                let ms = le_i64(b, at)?;
                at += 8;
                if !(MIN_DATE_MS..=MAX_DATE_MS).contains(&ms) {
                    return None;
                }
                Value::Date(ms)
            }
            0x0A => Value::Null,
            0x10 => {
                let v = le_i32(b, at)?;
                at += 4;
                Value::Int32(v)
            }
            0x11 => {
                let inc = le_i32(b, at)? as u32;
                let time = le_i32(b, at + 4)? as u32;
                at += 8;
                Value::Timestamp(time, inc)
            }
            0x12 => {
                let v = le_i64(b, at)?;
                at += 8;
                Value::Int64(v)
            }
            0x7F => Value::MaxKey,
            0xFF => Value::MinKey,
            _ => return None,
        };
        if at > b.len() - 1 {
            return None;
        }
        self.at = at;
        Some(Some((name, value)))
    }
}

/// Every element of a document, or `None` when one is unknown, malformed, or a name
/// repeats (pymongo keeps the last value at the first one's place: not worth following).
pub fn fields(doc: &[u8]) -> Option<Vec<(&str, Value<'_>)>> {
    let mut it = elements(doc)?;
    let mut out: Vec<(&str, Value)> = Vec::with_capacity(16);
    let mut seen: Option<std::collections::HashSet<&str>> = None; // past 16 members
    while let Some((name, value)) = it.next_element()? {
        let repeated = match &mut seen {
            Some(names) => !names.insert(name),
            None if out.len() >= 16 => {
                let mut names: std::collections::HashSet<&str> =
                    out.iter().map(|(n, _)| *n).collect();
                let repeated = !names.insert(name);
                seen = Some(names);
                repeated
            }
            None => out.iter().any(|(n, _)| *n == name),
        };
        if repeated {
            return None;
        }
        out.push((name, value));
    }
    Some(out)
}

/// The value of one top-level field (first occurrence), without checking the rest.
pub fn get<'a>(fields: &[(&'a str, Value<'a>)], name: &str) -> Option<Value<'a>> {
    fields.iter().find(|(n, _)| *n == name).map(|(_, v)| *v)
}
