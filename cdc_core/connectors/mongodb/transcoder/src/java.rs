//! How the MongoDB Java driver reads what Rust's types do not say the same way: text that
//! is not UTF-8 (the JDK's `new String(bytes, UTF_8)`) and Decimal128 values
//! (`Decimal128.toString`). `java_bson.py` does the same, byte for byte.

use std::borrow::Cow;

const REPLACEMENT: char = '\u{fffd}';

fn continuation(b: u8) -> bool {
    b & 0xC0 == 0x80
}

fn bad_second_of_four(b1: u8, b2: u8) -> bool {
    b1 > 0xF4
        || (b1 == 0xF0 && !(0x90..=0xBF).contains(&b2))
        || (b1 == 0xF4 && b2 & 0xF0 != 0x80)
        || !continuation(b2)
}

/// The JDK's decoding of bytes that are not UTF-8: each malformed sequence one U+FFFD,
/// grouped as the JDK groups them (`ED A0 80`, a surrogate, is one; a sequence cut
/// short at the end is one and ends the text).
pub fn java_utf8(data: &[u8]) -> String {
    let mut out = String::with_capacity(data.len() + 8);
    let n = data.len();
    let mut sp = 0;
    while sp < n {
        let b1 = data[sp];
        sp += 1;
        if b1 < 0x80 {
            out.push(b1 as char);
        } else if (0xC2..=0xDF).contains(&b1) {
            if sp < n {
                let b2 = data[sp];
                if !continuation(b2) {
                    out.push(REPLACEMENT);
                } else {
                    out.push(
                        char::from_u32(((b1 as u32 & 0x1F) << 6) | (b2 as u32 & 0x3F))
                            .unwrap_or(REPLACEMENT),
                    );
                    sp += 1;
                }
                continue;
            }
            out.push(REPLACEMENT);
            break;
        } else if (0xE0..=0xEF).contains(&b1) {
            if sp + 1 < n {
                let (b2, b3) = (data[sp], data[sp + 1]);
                let first_bad = (b1 == 0xE0 && b2 & 0xE0 == 0x80) || !continuation(b2);
                if first_bad || !continuation(b3) {
                    out.push(REPLACEMENT);
                    if !first_bad {
                        sp += 1;
                    }
                } else {
                    let c =
                        ((b1 as u32 & 0x0F) << 12) | ((b2 as u32 & 0x3F) << 6) | (b3 as u32 & 0x3F);
                    out.push(char::from_u32(c).unwrap_or(REPLACEMENT)); // a surrogate is none
                    sp += 2;
                }
                continue;
            }
            if sp < n && ((b1 == 0xE0 && data[sp] & 0xE0 == 0x80) || !continuation(data[sp])) {
                out.push(REPLACEMENT);
                continue;
            }
            out.push(REPLACEMENT);
            break;
        } else if (0xF0..=0xF7).contains(&b1) {
            if sp + 2 < n {
                let (b2, b3, b4) = (data[sp], data[sp + 1], data[sp + 2]);
                let c = ((b1 as u32 & 0x07) << 18)
                    | ((b2 as u32 & 0x3F) << 12)
                    | ((b3 as u32 & 0x3F) << 6)
                    | (b4 as u32 & 0x3F);
                if !continuation(b2)
                    || !continuation(b3)
                    || !continuation(b4)
                    || !(0x10000..0x110000).contains(&c)
                {
                    out.push(REPLACEMENT);
                    if bad_second_of_four(b1, b2) {
                    } else if !continuation(b3) {
                        sp += 1;
                    } else {
                        sp += 2;
                    }
                } else {
                    out.push(char::from_u32(c).unwrap_or(REPLACEMENT));
                    sp += 3;
                }
                continue;
            }
            if b1 > 0xF4 || (sp < n && bad_second_of_four(b1, data[sp])) {
                out.push(REPLACEMENT);
                continue;
            }
            sp += 1;
            out.push(REPLACEMENT);
            if sp < n && !continuation(data[sp]) {
                continue;
            }
            break;
        } else {
            out.push(REPLACEMENT);
        }
    }
    out
}

/// A BSON string's or name's bytes as the Java driver reads them.
#[inline]
pub fn text_of(data: &[u8]) -> Cow<'_, str> {
    if data.is_ascii() {
        // SAFETY: ASCII is UTF-8 (most names are: checked here without the full decoder)
        return Cow::Borrowed(unsafe { std::str::from_utf8_unchecked(data) });
    }
    match std::str::from_utf8(data) {
        Ok(text) => Cow::Borrowed(text),
        Err(_) => Cow::Owned(java_utf8(data)),
    }
}

/// Java's `Decimal128.toString` of a BSON Decimal128's 16 bytes: `NaN`, `Infinity`,
/// `-Infinity`; else the coefficient's digits, plain when the exponent is at most 0 and
/// the adjusted exponent at least -6, else `d.dddE+n`; a negative zero keeps its sign;
/// a coefficient past 10^34 - 1 is written as it is.
pub fn decimal128(out: &mut Vec<u8>, value: &[u8]) {
    let low = u64::from_le_bytes(value[..8].try_into().unwrap());
    let high = u64::from_le_bytes(value[8..16].try_into().unwrap());
    if high & (0x7C << 56) == 0x7C << 56 {
        out.extend_from_slice(b"NaN");
        return;
    }
    let negative = high & (1 << 63) != 0;
    if high & (0x78 << 56) == 0x78 << 56 {
        out.extend_from_slice(if negative { b"-Infinity" } else { b"Infinity" });
        return;
    }
    let (exponent, coefficient) = if high & (3 << 61) == 3 << 61 {
        (
            (((high & 0x1FFF_E000_0000_0000) >> 47) as i64) - 6176,
            0u128,
        )
    } else {
        (
            (((high & 0x7FFF_8000_0000_0000) >> 49) as i64) - 6176,
            ((high & 0x0001_FFFF_FFFF_FFFF) as u128) << 64 | low as u128,
        )
    };
    let digits = coefficient.to_string();
    let digits = digits.as_bytes();
    if negative {
        out.push(b'-');
    }
    let adjusted = exponent + digits.len() as i64 - 1;
    if exponent <= 0 && adjusted >= -6 {
        if exponent == 0 {
            out.extend_from_slice(digits);
            return;
        }
        let pad = -exponent - digits.len() as i64;
        if pad >= 0 {
            out.extend_from_slice(b"0.");
            out.extend(std::iter::repeat_n(b'0', pad as usize));
            out.extend_from_slice(digits);
        } else {
            let whole = (-pad) as usize;
            out.extend_from_slice(&digits[..whole]);
            out.push(b'.');
            out.extend_from_slice(&digits[whole..]);
        }
        return;
    }
    out.push(digits[0]);
    if digits.len() > 1 {
        out.push(b'.');
        out.extend_from_slice(&digits[1..]);
    }
    out.push(b'E');
    if adjusted > 0 {
        out.push(b'+');
    }
    out.extend_from_slice(adjusted.to_string().as_bytes());
}
