//! A BSON reader for change events and documents, as the MongoDB Java driver reads them
//! (`bson_text.py` has the same rules): every type MongoDB stores, the deprecated ones
//! included, lengths checked at every level, a repeated name keeping its first place and
//! its last value. Anything malformed is `None`: the caller hands that event to the Python
//! path, which applies `event.processing.failure.handling.mode` to it.

use std::borrow::Cow;

use crate::java::text_of;

#[derive(Clone, Copy)]
pub enum Value<'a> {
    Double(f64),
    Str(&'a [u8]), // its bytes without the terminating zero, as stored (maybe not UTF-8)
    Document(&'a [u8]),
    Array(&'a [u8]),
    Binary(u8, &'a [u8]), // the old subtype 2 without its inner length
    Undefined,
    ObjectId(&'a [u8]),
    Bool(bool),
    Date(i64),
    Null,
    // The next three hold their whole value (split by `parts`): a value of one slice keeps
    // `Value` at 24 bytes, which a document's members are vectors of.
    Regex(&'a [u8]),     // pattern, 0, options
    DbPointer(&'a [u8]), // namespace as a string, ObjectId
    Code(&'a [u8]),
    Symbol(&'a [u8]),
    CodeWithScope(&'a [u8]), // length, code as a string, scope document
    Int32(i32),
    Timestamp(u32, u32), // (time, increment)
    Int64(i64),
    Decimal128(&'a [u8]),
    MinKey,
    MaxKey,
}

/// A regular expression's pattern and options.
pub fn regex_parts(whole: &[u8]) -> (&[u8], &[u8]) {
    let nul = whole.iter().position(|&c| c == 0).unwrap_or(whole.len());
    (&whole[..nul], whole.get(nul + 1..).unwrap_or_default())
}

/// A DBPointer's namespace and ObjectId (checked when read).
pub fn db_pointer_parts(whole: &[u8]) -> (&[u8], &[u8]) {
    let oid = whole.len() - 12;
    (&whole[4..oid - 1], &whole[oid..])
}

/// Code with scope's code and scope document (checked when read).
pub fn code_with_scope_parts(whole: &[u8]) -> (&[u8], &[u8]) {
    let (code, next) = string(whole, 4, whole.len()).unwrap_or_default();
    (code, &whole[next..])
}

impl<'a> Value<'a> {
    /// A string's text when it is UTF-8 (the envelope's fields: anything else goes the
    /// Python way).
    pub fn utf8(&self) -> Option<&'a str> {
        match self {
            Value::Str(s) => std::str::from_utf8(s).ok(),
            _ => None,
        }
    }
}

pub fn le_i32(b: &[u8], at: usize) -> Option<i32> {
    Some(i32::from_le_bytes(
        b.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}

fn le_i64(b: &[u8], at: usize) -> Option<i64> {
    Some(i64::from_le_bytes(
        b.get(at..at.checked_add(8)?)?.try_into().ok()?,
    ))
}

/// A length at `at` of at least `least`, whose value ends no further than `end`.
fn size(b: &[u8], at: usize, end: usize, least: i32) -> Option<usize> {
    if at + 4 > end {
        return None;
    }
    let n = le_i32(b, at)?;
    if n < least || at + n as usize > end {
        return None;
    }
    Some(n as usize)
}

/// A string at `at` (length, bytes, zero) ending no further than `end`: its bytes and end.
fn string(b: &[u8], at: usize, end: usize) -> Option<(&[u8], usize)> {
    if at + 4 > end {
        return None;
    }
    let n = le_i32(b, at)?;
    if n <= 0 {
        return None;
    }
    let stop = at + 4 + n as usize;
    if stop > end || b[stop - 1] != 0 {
        return None;
    }
    Some((&b[at + 4..stop - 1], stop))
}

fn cstring(b: &[u8], at: usize, end: usize) -> Option<(&[u8], usize)> {
    let n = b.get(at..end)?.iter().position(|&c| c == 0)?;
    Some((&b[at..at + n], at + n + 1))
}

/// The elements of one document (its whole bytes: length, elements, trailing 0).
pub struct Elements<'a> {
    b: &'a [u8],
    at: usize,
    stop: usize,              // the terminating zero
    last: (u8, usize, usize), // the last value's type and bytes
}

pub fn elements(doc: &[u8]) -> Option<Elements<'_>> {
    let len = le_i32(doc, 0)?;
    if len < 5 || len as usize != doc.len() || doc[doc.len() - 1] != 0 {
        return None;
    }
    Some(Elements {
        b: doc,
        at: 4,
        stop: doc.len() - 1,
        last: (0, 0, 0),
    })
}

/// A document or array at `at`, ending no further than `end` (its terminator checked
/// here, its members when it is read).
fn nested(b: &[u8], at: usize, end: usize) -> Option<(&[u8], usize)> {
    let n = size(b, at, end, 5)?;
    if b[at + n - 1] != 0 {
        return None;
    }
    Some((&b[at..at + n], at + n))
}

impl<'a> Elements<'a> {
    /// The next (name's bytes, value); `Some(None)` at the end; `None` when malformed.
    pub fn next_element(&mut self) -> Option<Option<(&'a [u8], Value<'a>)>> {
        let (b, stop) = (self.b, self.stop);
        if self.at == stop {
            return Some(None);
        }
        let kind = *b.get(self.at)?;
        let (name, mut at) = cstring(b, self.at + 1, stop)?;
        let start = at;
        let fixed = |at: usize, n: usize| if at + n <= stop { Some(()) } else { None };
        let value = match kind {
            0x01 => {
                fixed(at, 8)?;
                let v = f64::from_bits(le_i64(b, at)? as u64);
                at += 8;
                Value::Double(v)
            }
            0x02 | 0x0D | 0x0E => {
                let (text, end) = string(b, at, stop)?;
                at = end;
                match kind {
                    0x02 => Value::Str(text),
                    0x0D => Value::Code(text),
                    _ => Value::Symbol(text),
                }
            }
            0x03 | 0x04 => {
                let (doc, end) = nested(b, at, stop)?;
                at = end;
                if kind == 0x03 {
                    Value::Document(doc)
                } else {
                    Value::Array(doc)
                }
            }
            0x05 => {
                fixed(at, 5)?;
                let n = le_i32(b, at)?;
                if n < 0 || at + 5 + n as usize > stop {
                    return None;
                }
                let subtype = b[at + 4];
                let mut start = at + 5;
                let end = start + n as usize;
                if subtype == 2 {
                    // the old binary: its length again inside, which the Java driver strips
                    if n < 4 || le_i32(b, start)? != n - 4 {
                        return None;
                    }
                    start += 4;
                }
                at = end;
                Value::Binary(subtype, &b[start..end])
            }
            0x06 => Value::Undefined,
            0x07 => {
                fixed(at, 12)?;
                at += 12;
                Value::ObjectId(&b[at - 12..at])
            }
            0x08 => {
                fixed(at, 1)?;
                let v = b[at];
                at += 1;
                match v {
                    0 => Value::Bool(false),
                    1 => Value::Bool(true),
                    _ => return None,
                }
            }
            0x09 => {
                fixed(at, 8)?;
                let ms = le_i64(b, at)?;
                at += 8;
                Value::Date(ms)
            }
            0x0A => Value::Null,
            0x0B => {
                let (_, next) = cstring(b, at, stop)?;
                let (_, next) = cstring(b, next, stop)?;
                let whole = &b[at..next - 1];
                at = next;
                Value::Regex(whole)
            }
            0x0C => {
                let (_, next) = string(b, at, stop)?;
                fixed(next, 12)?;
                let whole = &b[at..next + 12];
                at = next + 12;
                Value::DbPointer(whole)
            }
            0x0F => {
                let n = size(b, at, stop, 14)?;
                let end = at + n;
                let (_, next) = string(b, at + 4, end)?;
                let (_, next) = nested(b, next, end)?;
                if next != end {
                    return None;
                }
                let whole = &b[at..end];
                at = end;
                Value::CodeWithScope(whole)
            }
            0x10 => {
                fixed(at, 4)?;
                let v = le_i32(b, at)?;
                at += 4;
                Value::Int32(v)
            }
            0x11 => {
                fixed(at, 8)?;
                let inc = le_i32(b, at)? as u32;
                let time = le_i32(b, at + 4)? as u32;
                at += 8;
                Value::Timestamp(time, inc)
            }
            0x12 => {
                fixed(at, 8)?;
                let v = le_i64(b, at)?;
                at += 8;
                Value::Int64(v)
            }
            0x13 => {
                fixed(at, 16)?;
                at += 16;
                Value::Decimal128(&b[at - 16..at])
            }
            0x7F => Value::MaxKey,
            0xFF => Value::MinKey,
            _ => return None,
        };
        self.at = at;
        self.last = (kind, start, at);
        Some(Some((name, value)))
    }

    /// The type byte and bytes of the value `next_element` returned last.
    pub fn last_raw(&self) -> (u8, &'a [u8]) {
        let (kind, start, end) = self.last;
        (kind, &self.b[start..end])
    }
}

/// A member name as the Java driver reads it.
#[inline]
pub fn name_of(raw: &[u8]) -> Cow<'_, str> {
    text_of(raw)
}

/// Every member of a document in stored order, a repeated name keeping its first place
/// and its last value as the Java driver's `BsonDocument` does; `None` when malformed.
/// `check` is called on each value a repeat replaces (the Java driver reads it too, so a
/// malformed one fails the document).
pub fn fields_checked<'a>(
    doc: &'a [u8],
    mut check: impl FnMut(Value<'a>) -> Option<()>,
) -> Option<Vec<(Cow<'a, str>, Value<'a>)>> {
    let mut it = elements(doc)?;
    let mut out: Vec<(Cow<'a, str>, Value<'a>)> = Vec::with_capacity(16);
    let mut seen: Option<std::collections::HashMap<Cow<'a, str>, usize>> = None; // past 16 members
    while let Some((raw, value)) = it.next_element()? {
        let name = name_of(raw);
        let place = match &mut seen {
            Some(places) => match places.get(&name) {
                Some(&place) => Some(place),
                None => {
                    places.insert(name.clone(), out.len());
                    None
                }
            },
            None => {
                let place = out.iter().position(|(n, _)| *n == name);
                if place.is_none() && out.len() >= 16 {
                    let mut places: std::collections::HashMap<Cow<'a, str>, usize> = out
                        .iter()
                        .enumerate()
                        .map(|(i, (n, _))| (n.clone(), i))
                        .collect();
                    places.insert(name.clone(), out.len());
                    seen = Some(places);
                }
                place
            }
        };
        match place {
            Some(place) => {
                check(out[place].1)?;
                out[place].1 = value;
            }
            None => out.push((name, value)),
        }
    }
    Some(out)
}

/// `fields_checked` for the envelope's own fields, whose replaced values are not looked
/// into (pymongo, which reads them on the Python path, does not either).
pub fn fields(doc: &[u8]) -> Option<Vec<(Cow<'_, str>, Value<'_>)>> {
    fields_checked(doc, |_| Some(()))
}

/// The value of one member (the last of a repeated name).
pub fn get<'a>(fields: &[(Cow<'a, str>, Value<'a>)], name: &str) -> Option<Value<'a>> {
    fields.iter().find(|(n, _)| n == name).map(|(_, v)| *v)
}

/// The values of an array in order (its members' names are not read, as in the Java
/// driver's `BsonArray`).
pub fn items(array: &[u8]) -> Option<Vec<Value<'_>>> {
    let mut it = elements(array)?;
    let mut out = Vec::with_capacity(8);
    while let Some((_, value)) = it.next_element()? {
        out.push(value);
    }
    Some(out)
}
