//! Numbers as text: integers without the formatting machinery, and doubles as Java's
//! `Double.toString` writes them (Debezium's records are the Java driver's text).

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
